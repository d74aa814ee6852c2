package uidclient

// NewBlockSourceWithHook is newBlockSource for the external tests, which
// stall a source between fetching a block and acknowledging it.
var NewBlockSourceWithHook = newBlockSource
