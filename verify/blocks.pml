/*
 * JetStream blocks: the consumer side of natsio/uidclient/blocks_source.go
 * (docs/blocks.md) against nats-server's work-queue consumer as
 * docs/blocks.md records it. docs/verification.md maps every step to the
 * Go function it models.
 *
 * Property: no block is used by two sources (assertion in the check).
 *
 * The server, as measured (TestJetStreamAckToRecreatedConsumer): a pull
 * is served by whichever instance of the durable consumer exists when it
 * arrives (by name); an instance delivers a message again, with a higher
 * delivery count, once its ack wait passed without an ack (any time
 * here: a source may stall for any length); an ack or a Term is matched
 * by the stream sequence, by whichever instance exists when it arrives,
 * and removes the message from the work queue; a late ack, even of a
 * message acknowledged or redelivered meanwhile, is confirmed; a
 * re-created consumer (new Created time, never an earlier one) starts its
 * delivery counts over for every message still in the stream.
 *
 * Environment, at every step: the consumer is deleted and re-created, or
 * the stream with it (up to MAXCONS consumer instances); a source stalls for any length, between any
 * two of its steps; an ack's confirmation is lost (the source gives the
 * block up); a consumer-info request fails (the blocks waiting are given
 * up); a source binds again.
 *
 * The publisher (natsio/blocks_publisher.go): block 0 was stored once; a
 * block whose acknowledgement was lost is given up (BlockPublisher.await),
 * never published again. Block 1 is refused while the stream is full
 * (the server's definite answer: not stored), held, and published again,
 * the same message, once there is room, any number of refusals later and
 * into whichever stream exists then.
 *
 * Mutations (spin -DMUTANT_...): each must produce a violation.
 *   USE_REDELIVERY   a block is used on a redelivery (rule 1 dropped)
 *   NO_CREATED_CHECK a block is used without the consumer's Created time
 *                    checked after the ack (rule 3 dropped)
 *   PUBLISH_RETRY    the publisher sends a block again after its
 *                    acknowledgement was lost (the code before the fix
 *                    spin found: docs/verification.md, "Findings")
 *   HOLD_UNKNOWN     the publisher holds a block whose outcome is unknown
 *                    (stored, its acknowledgement lost) like a refused one
 *                    and publishes it again
 *   NO_BLOCK_MEMORY  D6 removed: a source uses a block once its ack is
 *                    confirmed, without the durable claim below
 *
 * The store forgets (LOSSES times) what it has not made durable: the
 * stream's removals (acks, Terms), deliveries and the consumer's
 * re-creations since its last sync, and the claims below; a block whose
 * removal is forgotten is back in the stream, its delivery count as it
 * was. A write older than W is durable: "the source waits W" is "the
 * store has synced since the write".
 *
 * D6 (natsio/uidclient/blocks_claims.go): a source uses a block only after it
 * claimed it in the store (a KV Create keyed by the block, failing when
 * the key exists), waited W, and read its own claim back. A claim read
 * back after W cannot be forgotten, so a block whose removal is forgotten
 * and that is delivered again is refused by the Create or at the read.
 *
 * Finding (spin -DDESIGN_MEMORY_AGE, expected to fail): D6 as first
 * designed, a living source remembering the blocks it used and every
 * source refusing a block older than the block max age: a block whose ack
 * is forgotten right after its use comes back young, to the other source.
 */

#define NS 2            /* sources */
#define NM 2            /* blocks (messages) in the stream */
#ifndef MAXCONS
#define MAXCONS MAXCONS_DEFAULT /* consumer instances: created, then re-created */
#endif

/* Two runs: the protocol without loss at the larger bound (spin
 * -DWITHOUT_LOSS, and the mutations of the protocol), and with the loss
 * and D6 at a smaller one. */
#if defined(WITHOUT_LOSS) || defined(MUTANT_USE_REDELIVERY) || defined(MUTANT_NO_CREATED_CHECK) || defined(MUTANT_PUBLISH_RETRY) || defined(MUTANT_HOLD_UNKNOWN)
#define LOSSES_DEFAULT 0
#define MAXCONS_DEFAULT 3
#else
#define LOSSES_DEFAULT 1
#define MAXCONS_DEFAULT 3
#endif
#ifndef LOSSES
#define LOSSES LOSSES_DEFAULT
#endif
#if LOSSES > 0 && !defined(MUTANT_NO_BLOCK_MEMORY) && !defined(DESIGN_MEMORY_AGE)
#define D6 1
#endif
byte cons = 1;          /* the consumer instance that exists (its Created) */
/* What a loss comes back to. */
bool dirty = false;     /* written since the last sync */
#if LOSSES > 0
#define WRITTEN dirty = true
#else
#define WRITTEN skip
#endif
byte losses = 0;
byte sCons = 1;
bool sGone[NM];
byte sDelivered[NM];
/* D6's claims: 0 none, else the source + 1; and what a loss keeps. */
byte claim[NM];
byte sClaim[NM];
bool claimDirty[NM];    /* a claim written since the last sync */

bool gone[NM];          /* acknowledged or terminated: out of the stream */
byte delivered[NM];     /* delivery count under the current instance */
byte used[NM];          /* sources that used the block */
bool dedup[NM] = true;  /* the stream's duplicate window knows the block's ID */
/* block 1 held by the publisher after a refusal (the loss run leaves the
 * publisher out: block 0 alone is the block whose removal is forgotten) */
#if LOSSES > 0
bool held1 = false;
#else
bool held1 = true;
#endif
bool out1 = true;       /* block 1 never stored */

/* The server: the consumer deleted and re-created; the store's sync
 * and loss. */
active proctype Server() {
	byte m;
	do
#if LOSSES > 0
	:: atomic { dirty ->
		sCons = cons;
		for (m : 0 .. NM - 1) { sGone[m] = gone[m]; sDelivered[m] = delivered[m]; sClaim[m] = claim[m]; claimDirty[m] = false }
		dirty = false; m = 0
	   }
	:: atomic { dirty && losses < LOSSES ->
		losses++;
		cons = sCons;
		for (m : 0 .. NM - 1) { gone[m] = sGone[m]; delivered[m] = sDelivered[m]; claim[m] = sClaim[m]; claimDirty[m] = false }
		dirty = false; m = 0
	   }
#endif
	:: atomic { cons < MAXCONS ->
		cons++; WRITTEN;
		for (m : 0 .. NM - 1) { delivered[m] = 0 }
		m = 0
	   }
	/* the stream deleted and created again: its blocks, its consumer and
	 * its memory of message IDs (the duplicate window) go with it */
	:: atomic { cons < MAXCONS ->
		cons++; WRITTEN;
		for (m : 0 .. NM - 1) { delivered[m] = 0; gone[m] = true; dedup[m] = false }
		m = 0
	   }
	od
}

/* BlockPublisher.topUp / await: block 1's publishes are refused while
 * the stream is full (nothing changes: skip), until one is stored; a
 * stored copy is a duplicate while the stream remembers its ID. */
active proctype Publisher() {
	do
	:: held1 -> skip                       /* refused: held for the next round */
#ifdef MUTANT_HOLD_UNKNOWN
	/* the mutant holds a block whose outcome is unknown (stored, its
	 * acknowledgement lost) as if it had been refused */
	:: atomic { held1 && out1 -> out1 = false; gone[1] = false; delivered[1] = 0; dedup[1] = true; WRITTEN }
#endif
	:: atomic { held1 -> held1 = false;
		if
		:: !out1 && dedup[1] -> skip       /* a duplicate: stored once */
		:: else -> out1 = false; gone[1] = false; delivered[1] = 0; dedup[1] = true; WRITTEN
		fi
	   }
	:: !held1 -> break
	od
}

#ifdef MUTANT_PUBLISH_RETRY
/* BlockPublisher.await: block 0's first publish was stored (the stream
 * remembers its Nats-Msg-Id) but its acknowledgement was lost. The code
 * gives the block up; the mutant publishes the same message again, any
 * time later. A stream that remembers the ID stores it once; a new stream
 * stores it as a new message. */
active proctype LostAckPublisher() {
	atomic {
		if
		:: dedup[0] -> skip                /* a duplicate: stored once */
		:: !dedup[0] -> gone[0] = false; delivered[0] = 0; dedup[0] = true; WRITTEN
		fi
	}
}
#endif

active [NS] proctype Source() {
	byte bound;             /* Created of the instance bound (0: none) */
	byte m, d;              /* the block pulled and its delivery count */
#ifdef DESIGN_MEMORY_AGE
	/* the blocks this source used; a block older than the max age is
	 * refused (the environment decides its age: any) */
	bool mem[NM];
#endif
	byte st;                /* 0: idle, 1: pulled, 2: acknowledged, to check,
	                         * 3: claimed, waiting W */

	do
	/* bind: CreateOrUpdateConsumer; its Created time */
	:: atomic { st == 0 -> bound = cons }

	/* pull (FetchNoWait / Next): served by the instance that exists; a
	 * first delivery, or a redelivery once the ack wait passed */
	:: atomic { st == 0 && bound != 0 ->
		select(m : 0 .. NM - 1);
		if
		:: !gone[m] && !(m == 1 && out1) && delivered[m] < 3 -> delivered[m]++; d = delivered[m]; st = 1; WRITTEN
		:: else -> m = 0                       /* nothing to pull */
		fi
	   }

	/* claim: rule 1, then the double ack (rule 2); the ack lands at
	 * whichever instance exists and is confirmed even when late */
	:: atomic { st == 1 ->
		if
#ifdef MUTANT_USE_REDELIVERY
		:: false -> skip
#else
		:: d != 1 -> gone[m] = true; WRITTEN; st = 0    /* rule 1: Term */
#endif
		:: else ->
			if
			:: gone[m] = true; WRITTEN; st = 2  /* acked, confirmed */
			:: gone[m] = true; WRITTEN; st = 0  /* acked, confirmation lost: given up */
			:: st = 0                          /* ack lost: given up (Term lost too) */
			fi
		fi;
		if :: st == 0 -> m = 0; d = 0 :: else -> skip fi
	   }

	/* checkLoop / settle: rule 3, the consumer's Created time read after
	 * the ack */
	:: atomic { st == 2 ->
		if
#ifdef MUTANT_NO_CREATED_CHECK
		:: true ->
#else
		:: cons == bound ->                    /* the instance bound */
#endif
#if defined(DESIGN_MEMORY_AGE)
			if
			:: mem[m] -> skip       /* used it before: refused */
			:: true -> skip                     /* older than the max age */
			:: !mem[m] ->
				mem[m] = true;
				used[m]++;
				assert(used[m] <= 1)
			fi;
			st = 0
#elif defined(D6)
			/* D6: claim the block in the store (Create) */
			if
			:: claim[m] == 0 -> claim[m] = _pid + 1; claimDirty[m] = true; WRITTEN; st = 3
			:: claim[m] != 0 -> st = 0         /* claimed before: refused */
			:: true -> st = 0                  /* store unreachable: given up */
			fi
#else
			used[m]++;                         /* use it */
			assert(used[m] <= 1);
			st = 0
#endif
		:: cons != bound -> bound = 0; st = 0  /* given up; bind again */
		:: true -> bound = 0; st = 0           /* info failed: given up */
		fi;
		if :: st == 0 -> m = 0; d = 0 :: else -> skip fi
	   }

#ifdef D6
	/* D6: W later (the store synced since the claim), the claim read
	 * back: its own, the block is used; otherwise refused. */
	:: atomic { st == 3 && !claimDirty[m] ->
		if
		:: claim[m] == _pid + 1 ->
			used[m]++;
			assert(used[m] <= 1)
		:: else -> skip
		fi;
		st = 0; m = 0; d = 0
	   }
#endif
	od
}
