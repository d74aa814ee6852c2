package protocol

import "strings"

// HeaderCarrier lets an OpenTelemetry propagator read and write trace
// context in NATS headers (nats.Header and micro.Headers convert to it).
// Keys match case-insensitively: nats.Header is case-sensitive, the W3C
// propagator writes "traceparent" and other clients may send
// "Traceparent" or "TRACEPARENT". (propagation.HeaderCarrier would
// canonicalise the key to "Traceparent" and miss the lower-case one.)
type HeaderCarrier map[string][]string

// Get returns the first value of key, matched without regard to case.
func (c HeaderCarrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	for k, v := range c {
		if len(v) > 0 && strings.EqualFold(k, key) {
			return v[0]
		}
	}
	return ""
}

// Set replaces every spelling of key with key itself holding value. The
// map must not be nil.
func (c HeaderCarrier) Set(key, value string) {
	for k := range c {
		if k != key && strings.EqualFold(k, key) {
			delete(c, k)
		}
	}
	c[key] = []string{value}
}

// Keys lists the header names as they are spelt.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
