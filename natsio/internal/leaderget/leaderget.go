// Package leaderget reads a stream's last message on a subject from the
// stream's leader (the JetStream API's message get, which only the leader
// answers), never through a direct get that any replica answers: a
// replica that lags answers with an older value or none. The worker-ID
// store (kvstore) reads leases and the fleet record so, and block sources
// read their block claims so (uidclient).
package leaderget

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Entry is a subject's last message as the stream leader has it.
type Entry struct {
	Value []byte
	Seq   uint64 // the message's stream sequence (a KV revision)
	// Found is false when the subject has no message, or its last is a
	// KV delete or purge (Seq is then the marker's).
	Found bool
}

// Last reads subject's last message of stream at the stream's leader.
func Last(ctx context.Context, nc *nats.Conn, stream, subject string) (Entry, error) {
	req, _ := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{subject})
	msg, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, req)
	if err != nil {
		return Entry{}, err
	}
	var resp struct {
		Message *struct {
			Seq  uint64 `json:"seq"`
			Hdrs []byte `json:"hdrs"`
			Data []byte `json:"data"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return Entry{}, err
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return Entry{}, nil
	case resp.Error != nil:
		return Entry{}, resp.Error
	case resp.Message == nil:
		return Entry{}, jetstream.ErrInvalidJetStreamResponse
	}
	if len(resp.Message.Hdrs) > 0 {
		h, err := nats.DecodeHeadersMsg(resp.Message.Hdrs)
		if err != nil {
			return Entry{}, fmt.Errorf("headers: %w", err)
		}
		if op := h.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
			return Entry{Seq: resp.Message.Seq}, nil
		}
	}
	return Entry{Value: resp.Message.Data, Seq: resp.Message.Seq, Found: true}, nil
}
