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
 */

#define NS 2            /* sources */
#define NM 2            /* blocks (messages) in the stream */
#define MAXCONS 3       /* consumer instances: created, then re-created twice */

byte cons = 1;          /* the consumer instance that exists (its Created) */
bool gone[NM];          /* acknowledged or terminated: out of the stream */
byte delivered[NM];     /* delivery count under the current instance */
byte used[NM];          /* sources that used the block */
bool dedup[NM] = true;  /* the stream's duplicate window knows the block's ID */
bool held1 = true;      /* block 1 held by the publisher after a refusal */
bool out1 = true;       /* block 1 never stored */

/* The server: the consumer deleted and re-created. */
active proctype Server() {
	byte m;
	do
	:: atomic { cons < MAXCONS ->
		cons++;
		for (m : 0 .. NM - 1) { delivered[m] = 0 }
		m = 0
	   }
	/* the stream deleted and created again: its blocks, its consumer and
	 * its memory of message IDs (the duplicate window) go with it */
	:: atomic { cons < MAXCONS ->
		cons++;
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
	:: atomic { held1 && out1 -> out1 = false; gone[1] = false; delivered[1] = 0; dedup[1] = true }
#endif
	:: atomic { held1 -> held1 = false;
		if
		:: !out1 && dedup[1] -> skip       /* a duplicate: stored once */
		:: else -> out1 = false; gone[1] = false; delivered[1] = 0; dedup[1] = true
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
		:: !dedup[0] -> gone[0] = false; delivered[0] = 0; dedup[0] = true
		fi
	}
}
#endif

active [NS] proctype Source() {
	byte bound;             /* Created of the instance bound (0: none) */
	byte m, d;              /* the block pulled and its delivery count */
	byte st;                /* 0: idle, 1: pulled, 2: acknowledged, to check */

	do
	/* bind: CreateOrUpdateConsumer; its Created time */
	:: atomic { st == 0 -> bound = cons }

	/* pull (FetchNoWait / Next): served by the instance that exists; a
	 * first delivery, or a redelivery once the ack wait passed */
	:: atomic { st == 0 && bound != 0 ->
		select(m : 0 .. NM - 1);
		if
		:: !gone[m] && !(m == 1 && out1) && delivered[m] < 3 -> delivered[m]++; d = delivered[m]; st = 1
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
		:: d != 1 -> gone[m] = true; st = 0    /* rule 1: Term */
#endif
		:: else ->
			if
			:: gone[m] = true; st = 2          /* acked, confirmed */
			:: gone[m] = true; st = 0          /* acked, confirmation lost: given up */
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
		:: cons == bound ->                    /* the instance bound: use it */
#endif
			used[m]++;
			assert(used[m] <= 1)
		:: cons != bound -> bound = 0          /* given up; bind again */
		:: true -> bound = 0                   /* info failed: given up */
		fi;
		st = 0; m = 0; d = 0
	   }
	od
}
