/*
 * Named sequence segments: sequence/allocator.go on the SegmentStore of
 * natsio/kvstore/sequences.go (workerid/mysqlstore/sequences.go is the
 * same protocol with the compare on MAX_ID's value, see
 * docs/verification.md). docs/verification.md maps every step to the Go
 * function it models.
 *
 * Properties
 *   - no sequence number is handed out twice, by any instance, across
 *     crashes, restarts and give-backs (the watched number, as in
 *     lease.pml: chosen at the start, counted when handed out);
 *   - the numbers one allocator hands out increase.
 *
 * Environment, at every step: an instance is killed (Abandon: what it
 * holds is lost) or stopped with SIGTERM (Close: the give-back) and
 * restarts; it pauses for any length; a Take or GiveBack is answered,
 * applied with its reply lost, delayed (its update lands later, still at
 * the revision it read, or never) or lost; a read is answered by a replica
 * one write behind (a KV direct get); the adaptive step is any of the
 * steps Leaf's rule can choose (1 or 2 here: the time a segment lasted is
 * any); a prefetch (the double buffer's second segment) starts whenever
 * fewer than two segments are held.
 *
 * The store forgets its last k <= K acknowledged writes (a power loss with
 * lazy fsync, a failover to a replica that lacks them), up to LOSSES
 * times: it comes back as it was before them, revisions included (the
 * next writes reuse them); a write in flight is lost with its connection.
 * K stands for W (DISPENSER_STORE_LOSS_WINDOW).
 *
 * Defenses against the loss (DURABILITY-DESIGN.md, MODELS-FINDINGS.md):
 *   D3  each instance remembers the highest end the store gave it (hw); a
 *       take that returns a segment starting below it is a regression:
 *       none of it is handed out and the end is raised to hw by
 *       compare-and-set. After an outage (every instance sees the loss as
 *       one: a reconnect) an instance checks the end against hw, and
 *       raises it, before its next take.
 *   D4  settle: after an outage no instance takes a segment until every
 *       instance has made that check (the settle period: an obligation
 *       the model encodes as a wait: the survivors reconnect and repair
 *       within it). A starting instance is one case; a survivor that
 *       remembers nothing above the end is another (see the finding).
 *
 * SILENT_LOSS (the environment of a second run): no instance sees the
 * loss as an outage (a JetStream cluster that loses an acknowledged write
 * while the clients stay connected: the KV stream's leader changes, the
 * links stay up; the fault harness saw it after a kill -9 of every node
 * on sync_interval: always). Each instance's periodic check (D3, every
 * CheckInterval, whatever happened) still raises the end to hw; pending
 * is the ghost of that check not yet made since the loss.
 *   D7  the loss is seen by the stream's epoch (sequence.LossWatcher:
 *       the KV stream's leader and its election time, its last sequence
 *       below one acknowledged, a reconnect): every loss comes with a new
 *       epoch. An instance reads the epoch after each take; one that
 *       differs from the epoch it started the take with (its baseline)
 *       means the segment may be a forgotten one: none of it is handed
 *       out, the baseline moves, and the instance settles (no take until
 *       the survivors' periodic checks are made: the settle period as a
 *       wait, as D4). The check loop reads the epoch too. A starting
 *       instance reads its baseline first, and settles when the epoch is
 *       younger than the settle period (a loss just before its start:
 *       encoded as a survivor's check still pending).
 *
 * UNTOLD_LOSS (a third run): a loss that neither an outage nor the epoch
 * tells (sequencetest's ForgottenSegments: the counter put back), of the
 * latest take of every instance (each remembers more than the store: a
 * survivor that remembers nothing above the end is SILENT_LOSS's case,
 * for D7). D3 alone defends it: a take or a check that finds the end
 * below hw raises it and holds this instance's takes (the quarantine)
 * until the periodic checks are made; a start settles the same way.
 *
 * The periodic check (SILENT_LOSS, UNTOLD_LOSS) is two steps, as in
 * Allocator.checkOne: the store's raise to hw, then the allocator hears
 * of it (regressed: the quarantine). A take and a check of one instance
 * run one at a time (storeMu): checking[me] is that lock.
 *
 * Obligation (the remainder, docs/verification.md): a loss never forgets
 * a take of an instance that died after it (the store and the only
 * instance that saw the allocation, lost together, cannot be detected):
 * ghost orphan.
 *
 * Mutations (spin -DMUTANT_...): each must produce a violation.
 *   GIVEBACK_NO_CAS  the give-back lowers the sequence's end when the
 *                    value read says so, without the compare-and-set
 *   TAKE_NO_CAS      a take writes the end it read plus the step without
 *                    the revision check
 *   NO_HIGH_WATER    D3 removed: no regression check, no repair
 *   NO_SETTLE        D4 removed: an instance takes without waiting for
 *                    the others' checks
 *   NO_LOSS_DETECTION  (SILENT_LOSS) D7 removed: no epoch read; D3's
 *                    periodic and per-take checks alone (the finding
 *                    SILENT_LOSS was before D7)
 *   DETECT_NO_SETTLE (SILENT_LOSS) D7 discards the segment taken under
 *                    a new epoch but takes again at once
 *   NO_YOUNG_EPOCH_SETTLE (SILENT_LOSS) a starting instance does not
 *                    settle when the epoch is young
 *   TAKE_BESIDE_CHECK (UNTOLD_LOSS) no storeMu: a take runs between the
 *                    check's raise to hw and its quarantine, finds
 *                    nothing behind and takes the numbers above hw that
 *                    another instance handed out and the store forgot
 *
 * Findings (spin -D..., expected to fail):
 *   DESIGN_SETTLE_AT_START  D4 as first designed: only a starting
 *                    instance waits; a survivor that remembers nothing
 *                    above the end takes a forgotten segment before the
 *                    survivor that handed it out has repaired the end
 * (SILENT_LOSS was a finding before D7: a loss no instance sees as an
 * outage, D3 alone comes too late; it is MUTANT_NO_LOSS_DETECTION now.)
 */

#if defined(MUTANT_NO_LOSS_DETECTION) || defined(MUTANT_DETECT_NO_SETTLE) || defined(MUTANT_NO_YOUNG_EPOCH_SETTLE)
#define SILENT_LOSS
#endif
#if defined(MUTANT_TAKE_BESIDE_CHECK)
#define UNTOLD_LOSS
#endif
#if defined(SILENT_LOSS) || defined(UNTOLD_LOSS)
#define PERIODIC_CHECK
#endif

#define NI 2            /* instances */
#ifndef MAXN
#define MAXN 5          /* numbers 0..MAXN-1 */
#endif
#define max(a, b) ((a) > (b) -> (a) : (b))
#define MINSTEP 1
#define MAXSTEP 2
/* Two runs: the protocol without loss at the larger bound (spin
 * -DWITHOUT_LOSS, and its mutations), and with the loss at a smaller one. */
#if defined(WITHOUT_LOSS) || defined(MUTANT_GIVEBACK_NO_CAS) || defined(MUTANT_TAKE_NO_CAS)
#define LOSSES_DEFAULT 0
#define MAXTAKES_DEFAULT 3
#else
#define LOSSES_DEFAULT 1
#define MAXTAKES_DEFAULT 2
#endif
#ifndef MAXTAKES
#define MAXTAKES MAXTAKES_DEFAULT  /* takes in the whole run */
#endif
#ifdef UNTOLD_LOSS
#undef MAXTAKES_DEFAULT
#define MAXTAKES_DEFAULT 3      /* one take of each, forgotten, and one more */
#define K_DEFAULT 2             /* a take of each instance */
#else
#define K_DEFAULT 1
#endif
#ifndef K
#define K K_DEFAULT     /* the store forgets at most its last K writes */
#endif
#ifndef LOSSES
#define LOSSES LOSSES_DEFAULT
#endif

/* The store (the key seq.<name> at the stream leader): the end of the
 * last segment taken and the key's revision; and the version before it,
 * which a lagging replica may still answer with. */
byte end = 0;
byte rev = 1;
byte prevEnd = 0;
byte prevRev = 0;       /* 0: no earlier version */

byte takes = 0;

/* What a loss comes back to, and how many writes it may forget. */
byte sEnd = 0;
byte sRev = 1;
byte unsynced = 0;
byte losses = 0;
/* An outage each instance has not checked after yet (D3); ghost: a dead
 * instance's take not yet durable (the obligation). */
bool outage[NI];
byte unsyncedTakeBy[NI];
bool orphan = false;
bool mustRepair[NI];    /* ghost: it handed out numbers the loss forgot */
bool fresh[NI];         /* started since the last loss */
#ifdef PERIODIC_CHECK
/* D7, D3's quarantine: an instance that settles takes nothing until the
 * checks are made */
#define SETTLED (!settling || (!pending[0] && !pending[1]))
bool pending[NI];       /* ghost: a periodic check not made since the loss */
#else
#define SETTLED true
#endif
#ifdef SILENT_LOSS
byte epoch = 0;         /* D7: the stream's epoch; every loss changes it */
#endif

/* One write in flight: (new end, revision it expects). */
bool dOn;
byte dEnd, dRev;

byte watchN;
byte watchCount = 0;

inline sync() {
	sEnd = end; sRev = rev; unsynced = 0;
	unsyncedTakeBy[0] = 0; unsyncedTakeBy[1] = 0; orphan = false
}

/* Every write: at most K acknowledged writes are ever forgotten. (The
 * loss's bookkeeping only where there is loss: it would multiply the
 * states of the run without it for nothing.) */
inline written() {
#if LOSSES > 0
	if :: unsynced == K -> sync() :: else -> skip fi;
	unsynced++
#else
	skip
#endif
}

/* kv.Update at a revision: applied only if the key is still at it. */
inline update(newEnd, atRev, ok) {
	if
	:: atRev == rev ->
		written();
		prevEnd = end; prevRev = rev; end = newEnd; rev++; ok = true
	:: else -> ok = false
	fi
}

/* SequenceStore.read: kv.Get, answered by the leader or a lagging
 * replica. */
inline read(e, r) {
	if
	:: e = end; r = rev
	:: prevRev != 0 -> e = prevEnd; r = prevRev
	fi
}

active proctype Network() {
	bool ok;
	do
	:: atomic { dOn -> if :: update(dEnd, dRev, ok) :: skip fi; dOn = false; dEnd = 0; dRev = 0; ok = false }
#if LOSSES > 0
	/* The store makes its writes durable. */
	:: atomic { unsynced > 0 -> sync() }
	/* The store forgets what it has not made durable; every instance sees
	 * an outage (unless SILENT_LOSS); a write in flight is lost. */
	:: atomic { unsynced > 0 && losses < LOSSES && !orphan &&
#ifdef UNTOLD_LOSS
		unsyncedTakeBy[0] > 0 && unsyncedTakeBy[1] > 0 &&
#endif
		true ->
		losses++;
		end = sEnd; rev = sRev; prevRev = 0; prevEnd = 0;
		unsynced = 0;
		dOn = false; dEnd = 0; dRev = 0;
		fresh[0] = false; fresh[1] = false;
		mustRepair[0] = unsyncedTakeBy[0] > 0; mustRepair[1] = unsyncedTakeBy[1] > 0;
		unsyncedTakeBy[0] = 0; unsyncedTakeBy[1] = 0;
#if defined(SILENT_LOSS)
		epoch++; pending[0] = true; pending[1] = true
#elif defined(UNTOLD_LOSS)
		pending[0] = true; pending[1] = true
#else
		outage[0] = true; outage[1] = true
#endif
	   }
#endif
	od
}

/* The instance dies (killed, or stopped): a take of it not yet durable
 * is then one nobody alive knows of (ghost orphan, the obligation). */
inline die() {
#if LOSSES > 0
	if :: unsyncedTakeBy[me] > 0 -> orphan = true :: else -> skip fi;
	unsyncedTakeBy[me] = 0; outage[me] = false
#else
	skip
#endif
}
/* D3: what the store gave it (and the ghost of what is not durable). */
inline took(top) {
#if LOSSES > 0
	hw = max(hw, top); unsyncedTakeBy[me]++
#else
	skip
#endif
}

proctype Instance(byte me) {
	/* held[0] = [f0, t0), held[1] = [f1, t1) (the double buffer) */
	byte f0, t0, f1, t1;
	byte step, last, n, e, r;
	byte hw;                /* D3: the highest end the store gave it */
	bool any, ok, closing;
#ifdef SILENT_LOSS
	byte base;              /* D7: the epoch this instance last settled on */
#endif
#ifdef PERIODIC_CHECK
	bool settling;          /* D7, D3: no take until the periodic checks are made */
	bool checking;          /* storeMu: the check raised the end, not yet heard of */
	bool found;             /* the check found the end below hw */
#endif

restart:
#if LOSSES > 0
	fresh[me] = true;
#endif
	f0 = 0; t0 = 0; f1 = 0; t1 = 0; step = MINSTEP; last = 0; any = false; closing = false; hw = 0;
#ifdef SILENT_LOSS
	/* NewAllocator: the baseline epoch first, then the start's settle
	 * when the epoch is younger than the settle period. */
	base = epoch;
#ifdef MUTANT_NO_YOUNG_EPOCH_SETTLE
	settling = false;
#else
	settling = pending[0] || pending[1];
#endif
#endif
#ifdef UNTOLD_LOSS
	/* the start's settle period */
	settling = pending[0] || pending[1];
#endif
#ifdef PERIODIC_CHECK
	checking = false; found = false;
#endif
	do
	/* Abandon (killed): what is held is lost. Not while it alone knows
	 * of numbers the store forgot (the obligation). */
	:: atomic { !closing && !mustRepair[me] &&
#ifdef PERIODIC_CHECK
		!checking &&
#endif
		true -> die(); goto restart }

	/* D3 after an outage: read the end (at the leader: the check's read),
	 * raise it to hw by compare-and-set, before any take. */
	:: atomic { outage[me] ->
#ifndef MUTANT_NO_HIGH_WATER
		if
		:: end < hw -> update(hw, rev, ok)   /* sequence.repaired */
		:: else -> ok = true
		fi;
		if
		:: ok -> outage[me] = false; mustRepair[me] = false
		:: else -> skip                      /* unreachable: try again */
		fi;
#else
		outage[me] = false; mustRepair[me] = false;
#endif
		ok = false
	   }

#ifdef PERIODIC_CHECK
	/* The periodic check (checkLoop, every CheckInterval): D7's epoch
	 * read first (checkEpoch), then checkOne under storeMu: D3's raise
	 * at the store, */
	:: atomic { pending[me] && !checking ->
#if defined(SILENT_LOSS) && !defined(MUTANT_NO_LOSS_DETECTION)
		if
		:: base != epoch -> base = epoch; settling = true
		:: else -> skip
		fi;
#endif
#ifndef MUTANT_NO_HIGH_WATER
		if
		:: end < hw -> update(hw, rev, ok); found = true   /* sequence.repaired */
		:: else -> skip
		fi;
#endif
		checking = true; ok = false
	   }
	/* then the allocator hears of it: a regression holds its takes
	 * (regressed: the quarantine). storeMu is released. */
	:: atomic { checking ->
		if :: found -> settling = true :: else -> skip fi;
		pending[me] = false; mustRepair[me] = false;
		checking = false; found = false
	   }
#endif

	/* startFetch -> SequenceStore.Take: when fewer than two segments
	 * are held (await on an empty one, maybePrefetch on a used one). */
	:: atomic { !closing && t1 == f1 && takes < MAXTAKES && !outage[me] &&
#if defined(PERIODIC_CHECK) && !defined(MUTANT_TAKE_BESIDE_CHECK)
		!checking &&                        /* storeMu */
#endif
#if defined(MUTANT_NO_SETTLE)
		true ->
#elif defined(DESIGN_SETTLE_AT_START)
		(!fresh[me] || (!outage[0] && !outage[1])) ->
#else
		!outage[0] && !outage[1] && SETTLED ->
#endif
		takes++;
#ifdef PERIODIC_CHECK
		settling = false;
#endif
		/* adaptStep: double or halve, within [MINSTEP, MAXSTEP] */
		select(step : MINSTEP .. MAXSTEP);
		read(e, r);
		if
		:: e + step > MAXN -> skip          /* ErrExhausted (the bound) */
		:: e + step <= MAXN ->
#ifdef MUTANT_TAKE_NO_CAS
			r = rev;
#endif
			if
			:: true ->                      /* answered */
				update(e + step, r, ok);
#ifndef MUTANT_NO_HIGH_WATER
				if
				:: ok && e < hw ->          /* D3: a regression */
					update(hw, rev, ok);    /* none handed out; raised */
#ifdef UNTOLD_LOSS
					settling = true;        /* regressed: the quarantine */
#endif
					ok = false
				:: else -> skip
				fi;
#endif
#if defined(SILENT_LOSS) && !defined(MUTANT_NO_LOSS_DETECTION)
				/* D7: the epoch read after the take */
				if
				:: ok && base != epoch ->       /* none handed out */
					base = epoch;
					takes--;                    /* it takes again (bounded: one per loss) */
#ifndef MUTANT_DETECT_NO_SETTLE
					settling = true;
#endif
					ok = false
				:: else -> skip
				fi;
#endif
				if
				:: ok && t0 == f0 -> f0 = e; t0 = e + step; took(t0)
				:: ok && t0 != f0 -> f1 = e; t1 = e + step; took(t1)
				:: !ok -> skip              /* lost race: it reads again */
				fi
			:: true -> update(e + step, r, ok)   /* applied, reply lost */
#ifndef UNTOLD_LOSS
			:: !dOn -> dOn = true; dEnd = e + step; dRev = r  /* delayed */
#endif
			:: true -> skip                 /* lost, store unreachable */
			fi
		fi;
		e = 0; r = 0; ok = false
	   }

	/* fill: the next number, from held[0]. */
	:: atomic { !closing && t0 > f0 ->
		n = f0; f0++;
		assert(!any || n > last);
		last = n; any = true;
		if
		:: n == watchN -> watchCount++; assert(watchCount <= 1)
		:: else -> skip
		fi;
		n = 0
	   }
	/* held = held[1:] when held[0] is used up */
	:: atomic { !closing && t0 == f0 && t1 > f1 -> f0 = f1; t0 = t1; f1 = 0; t1 = 0 }

	/* Close (SIGTERM): stop, then give back the rests, newest first;
	 * the first one not given back ends it (the rest is lost). */
#ifndef UNTOLD_LOSS
	:: !closing -> closing = true           /* (not in UNTOLD_LOSS: its bound) */
#endif
	:: atomic { closing && !mustRepair[me] &&
#ifdef PERIODIC_CHECK
		!checking &&
#endif
		true ->
		if
		:: t1 > f1 -> n = 1
		:: t1 == f1 && t0 > f0 -> n = 0
		:: else -> n = 2                    /* nothing left to give */
		fi;
		if :: n == 2 -> die() :: else -> skip fi;
		if
		:: n == 2 -> goto restart_out
		:: else -> skip
		fi;
		/* SequenceStore.GiveBack(seg) */
		read(e, r);
		if
		:: (n == 1 && e != t1) || (n == 0 && e != t0) ->
			die(); goto restart_out         /* a segment was taken since */
		:: else -> skip
		fi;
		if
		:: true ->                          /* answered */
#ifdef MUTANT_GIVEBACK_NO_CAS
			prevEnd = end; prevRev = rev; rev++; ok = true;
			if :: n == 1 -> end = f1 :: else -> end = f0 fi;
#else
			if
			:: n == 1 -> update(f1, r, ok)
			:: else -> update(f0, r, ok)
			fi;
#endif
			if
			:: ok && n == 1 -> f1 = 0; t1 = 0
			:: ok && n == 0 -> f0 = 0; t0 = 0
			:: !ok -> skip                  /* lost race: it reads again */
			fi
		:: true ->                          /* applied, reply lost: an error */
			if
			:: n == 1 -> update(f1, r, ok)
			:: else -> update(f0, r, ok)
			fi;
			die(); goto restart_out
		:: !dOn ->                          /* delayed: an error here */
			dOn = true; dRev = r;
			if :: n == 1 -> dEnd = f1 :: else -> dEnd = f0 fi;
			die(); goto restart_out
		:: true -> die(); goto restart_out  /* lost, store unreachable */
		fi;
		e = 0; r = 0; ok = false; n = 0
	   }
	od;
restart_out:
	e = 0; r = 0; ok = false; n = 0;
	goto restart
}

init {
	byte i;
	atomic {
		select(watchN : 0 .. MAXN - 1);
		for (i : 0 .. NI - 1) { run Instance(i) }
	}
}
