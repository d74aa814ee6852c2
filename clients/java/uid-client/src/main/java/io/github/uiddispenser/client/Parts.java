package io.github.uiddispenser.client;

import java.time.Instant;

/**
 * An ID split into its fields by a dispenser's {@code uid.parse}.
 *
 * @param id the ID
 * @param time the second it was issued in
 * @param workerId its worker ID
 * @param sequence its sequence within that second
 */
public record Parts(long id, Instant time, long workerId, long sequence) {
}
