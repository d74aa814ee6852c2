package uidclient

// NewBlockSourceWithHook is newBlockSource for the external tests, which
// stall a source between fetching a block and acknowledging it.
var NewBlockSourceWithHook = newBlockSource

// PrefetcherWaits is how many takes of p found the reserve empty and
// waited for a refill.
func PrefetcherWaits(p *Prefetcher) uint64 { return p.chain.waits.Load() }
