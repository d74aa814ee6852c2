package main

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The OTLP fields walked (opentelemetry/proto/collector/trace/v1 and
// trace/v1): ExportTraceServiceRequest.resource_spans,
// ResourceSpans.scope_spans, ScopeSpans.spans, Span.name.
const (
	requestResourceSpans = 1
	resourceScopeSpans   = 2
	scopeSpans           = 2
	spanName             = 5
)

var errTruncated = errors.New("truncated protobuf")

// countSpans adds the spans of an ExportTraceServiceRequest to counts, by
// name.
func countSpans(req []byte, counts map[string]int64) error {
	return eachField(req, requestResourceSpans, func(rs []byte) error {
		return eachField(rs, resourceScopeSpans, func(ss []byte) error {
			return eachField(ss, scopeSpans, func(span []byte) error {
				var name []byte
				err := eachField(span, spanName, func(b []byte) error {
					name = b
					return nil
				})
				counts[string(name)]++ // no string made when the name is counted already
				return err
			})
		})
	})
}

// eachField calls fn with the body of every length-delimited field num
// of the message msg, skipping the other fields.
func eachField(msg []byte, num uint64, fn func([]byte) error) error {
	for len(msg) > 0 {
		tag, n := binary.Uvarint(msg)
		if n <= 0 {
			return errTruncated
		}
		msg = msg[n:]
		var body []byte
		switch wire := tag & 7; wire {
		case 0: // varint
			if _, n = binary.Uvarint(msg); n <= 0 {
				return errTruncated
			}
			msg = msg[n:]
			continue
		case 1: // fixed64
			if len(msg) < 8 {
				return errTruncated
			}
			msg = msg[8:]
			continue
		case 5: // fixed32
			if len(msg) < 4 {
				return errTruncated
			}
			msg = msg[4:]
			continue
		case 2: // length-delimited
			size, n := binary.Uvarint(msg)
			if n <= 0 || uint64(len(msg)-n) < size {
				return errTruncated
			}
			body, msg = msg[n:n+int(size)], msg[n+int(size):]
		default:
			return fmt.Errorf("unsupported wire type %d", wire)
		}
		if tag>>3 == num {
			if err := fn(body); err != nil {
				return err
			}
		}
	}
	return nil
}
