package io.github.uiddispenser.client;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Reads the one JSON shape the protocol sends: a flat object whose values
 * are all strings (UidGenerator's parseUID). Keys keep their order.
 */
final class Json {
    private final String s;
    private int i;

    private Json(String s) {
        this.s = s;
    }

    /** The object's keys and values, in order. */
    static Map<String, String> stringObject(String text) {
        Json j = new Json(text);
        Map<String, String> m = new LinkedHashMap<>();
        j.expect('{');
        if (j.peek() == '}') {
            j.i++;
        } else {
            for (;;) {
                String k = j.string();
                j.expect(':');
                m.put(k, j.string());
                char c = j.next();
                if (c == '}') {
                    break;
                }
                if (c != ',') {
                    throw j.error("want , or }");
                }
            }
        }
        j.skipSpace();
        if (j.i != j.s.length()) {
            throw j.error("text after the object");
        }
        return m;
    }

    private String string() {
        expect('"');
        StringBuilder b = new StringBuilder();
        for (;;) {
            if (i >= s.length()) {
                throw error("unterminated string");
            }
            char c = s.charAt(i++);
            if (c == '"') {
                return b.toString();
            }
            if (c != '\\') {
                b.append(c);
                continue;
            }
            if (i >= s.length()) {
                throw error("unterminated escape");
            }
            char e = s.charAt(i++);
            switch (e) {
                case '"', '\\', '/' -> b.append(e);
                case 'b' -> b.append('\b');
                case 'f' -> b.append('\f');
                case 'n' -> b.append('\n');
                case 'r' -> b.append('\r');
                case 't' -> b.append('\t');
                case 'u' -> {
                    if (i + 4 > s.length()) {
                        throw error("short \\u escape");
                    }
                    try {
                        b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                    } catch (NumberFormatException x) {
                        throw error("bad \\u escape");
                    }
                    i += 4;
                }
                default -> throw error("bad escape \\" + e);
            }
        }
    }

    private void expect(char c) {
        if (next() != c) {
            throw error("want " + c);
        }
    }

    private char next() {
        skipSpace();
        if (i >= s.length()) {
            throw error("unexpected end");
        }
        return s.charAt(i++);
    }

    private char peek() {
        skipSpace();
        return i < s.length() ? s.charAt(i) : 0;
    }

    private void skipSpace() {
        while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
            i++;
        }
    }

    private UidException error(String what) {
        return new UidException("reply " + Wire.shorten(s, 120) + " is not a JSON object of strings: " + what + " at offset " + i);
    }
}
