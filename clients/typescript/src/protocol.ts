// The wire contract with the dispenser, as docs/protocol.md states it and
// natsio/uidclient's protocol.go declares it for Go. protocol/cases.json
// at the repository root holds the same contract as executable cases.

/** The micro service name `nats micro ls` shows. */
export const SERVICE_NAME = "uid-dispenser";
/** Subjects are `<prefix>.next`, `<prefix>.batch`, ...; `uid` by default. */
export const DEFAULT_SUBJECT_PREFIX = "uid";

/** Selects the encoding of the IDs in a batch reply. */
export const ENCODING_HEADER = "Uid-Encoding";
/** 8 bytes big-endian per ID: the compact form this client asks for. */
export const ENCODING_BINARY = "binary";
/**
 * Crockford base32, 13 characters per ID, newline-separated: text that
 * sorts as the numbers. The client asks for it when a call's encoding
 * option says so; batches default to binary, which is smaller.
 */
export const ENCODING_BASE32 = "base32";
/**
 * Runs of consecutive IDs, 16 bytes each: the first ID, then the count,
 * each 8 bytes big-endian, in increasing order. The client expands them:
 * the smallest reply for large batches, on uid.batch and the sequence
 * batch subjects of dispensers that have it.
 */
export const ENCODING_RANGES = "ranges";
/** Decimal needs no header: the name this client gives the default. */
export const ENCODING_DECIMAL = "decimal";
/**
 * On uid.parse: the layout to decode the ID with (a preset name such as
 * `uidgenerator`, or `T/W/S@epoch` as DISPENSER_LAYOUT takes it) instead
 * of the fleet's. A value that is no layout is a 400 naming it.
 */
export const LAYOUT_HEADER = "Uid-Layout";
/** With the 503 of an instance at its capacity: when it has IDs again. */
export const RETRY_AFTER_HEADER = "Uid-Retry-After-Ms";
/** On every reply of the sequence subjects: the instance that answered. */
export const INSTANCE_HEADER = "Uid-Instance";
/** micro's error headers: the description and the code. */
export const ERROR_HEADER = "Nats-Service-Error";
export const ERROR_CODE_HEADER = "Nats-Service-Error-Code";

/** Error codes in Nats-Service-Error-Code. */
export const CODE_BAD_REQUEST = 400; // malformed request; retrying cannot help
export const CODE_NOT_FOUND = 404; // sequence declared nowhere; retrying cannot help
export const CODE_INTERNAL = 500; // anything else; not retried
export const CODE_UNAVAILABLE = 503; // no ID right now; retry, another instance may answer

/** The size of one ID in a binary batch reply. */
export const BINARY_ID_WIDTH = 8;
/** The size of one run in a ranges reply: the first ID and the count. */
export const RANGE_WIDTH = 16;

/** The subject of an endpoint (`next`, `batch`, `parse`) under prefix. */
export function subject(prefix: string, endpoint: "next" | "batch" | "parse"): string {
  return `${prefix}.${endpoint}`;
}

/** The subject of op on the named sequence: `<prefix>.seq.<name>.<op>`. */
export function seqSubject(prefix: string, name: string, op: "next" | "batch" | "home"): string {
  return `${prefix}.seq.${name}.${op}`;
}
