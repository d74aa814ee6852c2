package kvstore

import (
	"errors"
	"testing"
)

// FuzzKVLeaseDecode: any bytes in a lease key decode to a valid lease or
// errBadLease, never a panic; a decoded lease survives a round trip.
func FuzzKVLeaseDecode(f *testing.F) {
	f.Add([]byte(`{"owner":"0123456789abcdef0123456789abcdef","expires_ms":1796040000000,"reserved":1796040060,"host":"10.0.0.1","port":"1796-42","type":2,"updated_ms":1796039990000}`))
	f.Add([]byte(`{"owner":"","expires_ms":0,"reserved":1796040060,"updated_ms":1796039990000}`))
	f.Add([]byte(`{"owner":"","expires_ms":0,"reserved":1796040060}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"reserved":-1}`))
	f.Add([]byte(`{"expires_ms":"soon"}`))
	f.Add([]byte(`not a lease`))
	f.Add([]byte(``))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := decodeKVLease(b)
		if err != nil {
			if !errors.Is(err, errBadLease) {
				t.Fatalf("error %v does not wrap errBadLease", err)
			}
			return
		}
		if l.Reserved < 0 || l.ExpiresMs < 0 || l.UpdatedMs <= 0 || len(l.Owner) > 64 {
			t.Fatalf("accepted an invalid lease %+v", l)
		}
		again, err := decodeKVLease(l.encode())
		if err != nil || again != l {
			t.Fatalf("round trip: %+v -> %+v, %v", l, again, err)
		}
	})
}
