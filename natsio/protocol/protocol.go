package protocol

// Protocol constants shared by the service and the client. Other languages
// speak the same protocol without our client: see docs/protocol.md.
const (
	// ServiceName is the micro service name that `nats micro ls` shows.
	ServiceName = "uid-dispenser"
	// ServiceVersion is the semantic version of the protocol and service.
	ServiceVersion = "1.0.0"
	// DefaultQueueGroup is the queue group instances join. micro's own
	// default, "q", is shared with demo services such as
	// `nats bench service serve`, which would then answer our subjects.
	DefaultQueueGroup = "uid-dispenser"
	// DefaultSubjectPrefix prefixes the endpoint subjects: uid.next, ...
	DefaultSubjectPrefix = "uid"

	// EndpointNext answers one decimal ID to a request with any body.
	EndpointNext = "next"
	// EndpointBatch answers the number of IDs the body asks for.
	EndpointBatch = "batch"
	// EndpointParse answers the fields of the decimal ID in the body as JSON.
	EndpointParse = "parse"

	// EndpointSeqNext and EndpointSeqBatch are the micro endpoints of the
	// named sequences, on the subjects SeqSubject gives: next and batch
	// as for IDs, the numbers of one sequence.
	EndpointSeqNext  = "seq_next"
	EndpointSeqBatch = "seq_batch"

	// EndpointSeqHome is the micro endpoint, in a fleet of regions only,
	// that answers a sequence's home region (the op EndpointHome on
	// SeqSubject): every instance of every region answers it for every
	// sequence of the fleet, while next and batch of a sequence are
	// subscribed only by its home region's instances. A client asks it
	// when a sequence request met no responders, to name the region that
	// cannot be reached (HomeUnreachableError).
	EndpointSeqHome = "seq_home"
	EndpointHome    = "home"

	// EncodingHeader selects the reply's encoding (see Encoding); absent
	// means newline-separated decimal, a value naming no encoding is a 400.
	EncodingHeader = "Uid-Encoding"
	// EncodingBinary packs each ID of a batch as 8 bytes big-endian.
	EncodingBinary = "binary"
	// EncodingBase32 writes each ID as 13 Crockford base32 characters
	// (AppendBase32), newline-separated in a batch.
	EncodingBase32 = "base32"
	// EncodingRanges packs a batch as runs of consecutive IDs, 16 bytes
	// each (Run): on uid.batch and the sequences' batch subjects.
	EncodingRanges = "ranges"

	// LayoutHeader on a parse request names the layout to decode the ID
	// with instead of the fleet's: a preset or T/W/S@epoch, as
	// DISPENSER_LAYOUT takes it (uidcore.ParseLayout).
	LayoutHeader = "Uid-Layout"

	// RetryAfterHeader comes with the 503 of an instance at its capacity:
	// the milliseconds after which it has IDs again (its next second).
	RetryAfterHeader = "Uid-Retry-After-Ms"

	// InstanceHeader comes with every reply of the sequence endpoints:
	// the micro instance ID of the instance that answered (as `nats
	// micro info` lists it). The numbers one instance hands out for a
	// name increase; across instances they interleave.
	InstanceHeader = "Uid-Instance"

	// BinaryIDWidth is the size of one ID in a binary batch reply.
	BinaryIDWidth = 8
)

// Subject returns the subject of an endpoint under prefix.
func Subject(prefix, endpoint string) string { return prefix + "." + endpoint }

// SeqSubject returns the subject of op (EndpointNext or EndpointBatch) on
// the sequence name under prefix: <prefix>.seq.<name>.<op>. With name "*"
// it is the wildcard the service subscribes to; a plain permission such
// as uid.seq.orders.> grants one sequence.
func SeqSubject(prefix, name, op string) string { return prefix + ".seq." + name + "." + op }
