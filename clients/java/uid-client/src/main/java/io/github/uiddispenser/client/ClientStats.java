package io.github.uiddispenser.client;

/**
 * What a client absorbed by retrying since it was made: callers see only
 * each call's final outcome.
 *
 * @param requests calls (each may take several attempts)
 * @param retries attempts after the first
 * @param unavailable 503 replies retried (at capacity, claim lost, shutting down)
 * @param noResponders attempts no dispenser was subscribed for
 * @param timedOut attempts that got no reply within the attempt timeout
 * @param moves times the connection was forced off a server that kept failing (a server cut off from its cluster)
 */
public record ClientStats(long requests, long retries, long unavailable, long noResponders, long timedOut, long moves) {
}
