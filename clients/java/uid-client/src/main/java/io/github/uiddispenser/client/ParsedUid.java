package io.github.uiddispenser.client;

import java.util.Optional;

/**
 * The reply of {@code uid.parse} with a {@code Uid-Layout}: UidGenerator's
 * parseUID fields, as strings, as sent.
 *
 * @param uid the ID in signed decimal (negative for a wrapped UidGenerator ID)
 * @param timestamp {@code yyyy-MM-dd HH:mm:ss} in UTC
 * @param workerId the worker-ID field
 * @param sequence the sequence field
 * @param wrapped present for a wrapped UidGenerator ID: why, as the dispenser says it
 * @param json the reply's JSON as received
 */
public record ParsedUid(String uid, String timestamp, String workerId, String sequence, Optional<String> wrapped, String json) {
}
