package io.github.uiddispenser.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class JsonTest {
    @Test
    void readsParseUidsShapeInOrder() {
        Map<String, String> m = Json.stringObject(" {\"UID\":\"1\", \"timestamp\" : \"2026-01-01 00:00:00\",\"wrapped\":\"true: a \\\"q\\\" \\u00e9\\n\"} ");
        assertEquals(List.of("UID", "timestamp", "wrapped"), List.copyOf(m.keySet()));
        assertEquals("true: a \"q\" é\n", m.get("wrapped"));
        assertEquals(Map.of(), Json.stringObject("{}"));
    }

    @Test
    void refusesOtherShapes() {
        for (String bad : new String[] {"", "[]", "{\"a\":1}", "{\"a\":\"b\"", "{\"a\":\"b\"} x", "{\"a\" \"b\"}", "{\"a\":\"\\x\"}"}) {
            assertThrows(UidException.class, () -> Json.stringObject(bad), bad);
        }
    }
}
