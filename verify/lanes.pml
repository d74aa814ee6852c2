/*
 * Lanes: uidcore/lanes.go and the padding loop of uidcore/cached.go.
 * docs/verification.md maps every step to the Go function it models.
 *
 * Instance A runs a CachedGenerator on its first lane (the caller's
 * claim) and claims an extra lane on demand; a lane claimed joins at the
 * next second, in worker-ID order; an idle lane is dropped at the next
 * second and given back (Retire at the last second it filled, then
 * Release). Instance B claims whatever worker ID is free and issues IDs
 * after its previous holder's second.
 *
 * Properties
 *   - the IDs of A's generator strictly increase, whatever lanes it holds
 *     (assertion in Pad: (second, worker, sequence) above the last);
 *   - no (worker ID, second, sequence) is issued twice, by A and B
 *     together (the watched ID, as in lease.pml).
 *
 * Environment, at every step: the wall clock reads any second 1..MAXS,
 * forward or back; a claim fails or is answered; a Release fails (the
 * store unreachable: the lease keeps its reservation and expires) or
 * lands; a lane is found idle at any moment (dropIdle runs between
 * padding rounds, also within a second); padding stops between any two
 * IDs (a round ends at the fill target, a reservation or a busy slot).
 * The reservations themselves are lease.pml's: a claim here reserves any
 * second up to the horizon at once.
 *
 * Also, at every step: A crashes (its generator and lane goroutine stop;
 * its leases stay in the store with their reservations until they
 * expire); a lease of A's expires at any moment and B takes its worker ID
 * over (a takeover); A's lane goroutine renews a lane, raising its
 * reservation, or finds it taken: the lane is lost (dropped at the next
 * second; the first lane lost ends the instance).
 *
 * The store's loss, as in lease.pml: the store forgets its last k <= K
 * acknowledged writes (K = 1 stands for the window W), up to LOSSES
 * times in the run, and comes back as it was before them. Against it
 * every lane has lease.pml's D1 and D2:
 *   D1  a lane issues only seconds of its durable reservation (until[]:
 *       confirmed present in the record by a renewal K writes later),
 *       not of the acknowledged one (res[]); a claimed lane warms until
 *       its first reservation is durable (Lease.Ready) and only then is
 *       pending (laneSet.awaitReady); lost while warming, it is given
 *       back having issued nothing;
 *   D2  a renewal that finds the record below what the lane last wrote
 *       (a regression) loses the lane.
 * A claim here is one write that takes the worker ID and reserves some
 * second of the horizon (lease.pml splits it into Acquire and the first
 * renewal). B waits for its own reservation to be durable before it
 * issues (its D1); the store forgets only its last writes, so all
 * before B's claim is durable then too.
 *
 * Mutations (spin -DMUTANT_...): each must produce a violation.
 *   JOIN_MIDSECOND   a claimed lane joins within a second padding has
 *                    begun filling (pad's lanes.sync without !g.dirty)
 *   RETIRE_EARLY     a lane given back retires at the second before the
 *                    last one it filled
 *   TAKEOVER_NO_SKIP B takes a worker ID over without skipping the seconds
 *                    A reserved
 *   LANE_NO_D1       D1 removed on lanes: a lane issues up to its
 *                    acknowledged reservation and joins at its claim,
 *                    without waiting to be Ready
 */

#define NW 2            /* worker IDs */
#define MAXS 2          /* wall-clock seconds 1..MAXS */
#ifndef MAXSEC
#define MAXSEC 2        /* horizon of reservations */
#endif
#ifndef NSEQ
#define NSEQ 2          /* sequence numbers per second */
#endif
#ifndef ACLAIMS
#define ACLAIMS 1       /* A's claims of an extra lane in the run */
#endif
#ifndef BCLAIMS
#define BCLAIMS 1       /* B's claims in the run */
#endif
#ifndef K
#define K 1             /* the store forgets at most its last K writes */
#endif
#ifndef LOSSES
#define LOSSES 1        /* losses in the whole run */
#endif

#define max(a, b) ((a) > (b) -> (a) : (b))
#define min(a, b) ((a) < (b) -> (a) : (b))

/* The store: owner (0 none, 1 A, 2 B) and reserved second. */
byte owner[NW];
byte reserved[NW];
byte aClaims = 0, bClaims = 0;
bool aAlive = true;
/* What a loss comes back to: the record as of the last write the store
 * made durable, and how many acknowledged writes it may still forget. */
byte sOwner[NW];
byte sReserved[NW];
byte unsynced = 0;
byte losses = 0;
byte si;

/* The store makes what it holds durable (an fsync, a replica catching
 * up): a loss comes back to it. */
inline storeSync() {
	for (si : 0 .. NW - 1) { sOwner[si] = owner[si]; sReserved[si] = reserved[si] }
	si = 0; unsynced = 0
}
/* Every write: at most K acknowledged writes are ever forgotten. */
inline written() {
	if
	:: unsynced == K -> storeSync()
	:: else -> skip
	fi;
	unsynced++
}

/* The watched ID and how often it was issued. */
byte watchW, watchS, watchQ;
byte watchCount = 0;

inline issue(w, s, q) {
	if
	:: w == watchW && s == watchS && q == watchQ ->
		watchCount++;
		assert(watchCount <= 1)
	:: else -> skip
	fi
}

/* A's lanes, padding-owned: worker IDs in ascending order (NW = 2: a
 * bit per worker ID is the sorted list), each lane's after, until and
 * lastUsed. */
bool held[NW];          /* in A's lane list */
bool drop[NW];          /* marked by dropIdle */
byte after[NW];
byte until[NW];         /* D1: the reservation known durable */
byte res[NW];           /* the reservation acknowledged (lane goroutine's) */
bool warm[NW];          /* claimed, not yet Ready (laneSet.awaitReady) */
byte lastUsed[NW];
byte primary;           /* the caller's lane, never dropped */
/* Claimed by the lane goroutine, waiting for the next second. */
bool pending[NW];
bool anyPending;
/* Dropped at sync, waiting for the lane goroutine's giveBack. */
bool releasing[NW];

/* Padding's position: the second, the lane (an index into the lane list,
 * as laneIdx is) and the sequence. */
byte next, idx, seq;
bool dirty;
/* The last ID A issued. */
byte lastS, lastW, lastQ;
bool any;

/* laneSet.sync: adopt the pending lanes, send the dropped ones back; the
 * list stays sorted by worker ID. */
inline sync() {
	for (i : 0 .. NW - 1) {
		if
		:: held[i] && drop[i] -> held[i] = false; drop[i] = false; releasing[i] = true
		:: else -> skip
		fi;
		if
		:: pending[i] -> pending[i] = false; held[i] = true
		:: else -> skip
		fi
	}
	anyPending = false;
	i = 0
}

/* startSecond: padding moves to the first lane of sec. */
inline startSecond(sec) {
	next = sec; idx = 0; seq = 0; dirty = false;
	sync()
}

/* The worker ID of the lane at index idx of the sorted list (NW: none). */
#define nheld (held[0] + held[1])
#define laneAt(p) ((p) == 0 -> (held[0] -> 0 : 1) : ((p) == 1 && held[0] && held[1] -> 1 : NW))

/* lane.usableFor's bound: Lease.Until, the durable reservation (D1). */
#ifdef MUTANT_LANE_NO_D1
#define LIMIT(w) res[w]
#else
#define LIMIT(w) until[w]
#endif

/* CachedGenerator.pad, one ID (or one skipped lane) at a time. */
proctype PaddingA() {
	byte i, now, w;
	do
	:: atomic { aAlive && next <= MAXSEC ->
		if
#ifdef MUTANT_JOIN_MIDSECOND
		:: anyPending -> sync(); idx = 0; seq = 0
#else
		:: !dirty && anyPending -> sync(); idx = 0; seq = 0
#endif
		:: else -> skip
		fi;
		select(now : 1 .. MAXS);
		if
		:: now > next -> startSecond(now)
		:: else -> skip
		fi;
		w = laneAt(idx);
		if
		:: idx >= nheld -> startSecond(next + 1)
		:: idx < nheld && drop[w] -> idx++; seq = 0            /* errLaneDropped */
		:: idx < nheld && !drop[w] && next <= after[w] ->
			idx++; seq = 0                                    /* errBeforeAfter */
		:: idx < nheld && !drop[w] && next > after[w] && next > LIMIT(w) ->
			skip                        /* ErrNotReserved: the round stops here */
		:: idx < nheld && !drop[w] && next > after[w] && next <= LIMIT(w) ->
			/* written: strictly above the last ID */
			assert(!any || next > lastS || (next == lastS && (w > lastW || (w == lastW && seq > lastQ))));
			issue(w, next, seq);
			lastS = next; lastW = w; lastQ = seq; any = true;
			lastUsed[w] = next; dirty = true;
			seq++;
			if :: seq == NSEQ -> idx++; seq = 0 :: else -> skip fi
		fi;
		now = 0; w = 0
	   }
	/* dropIdle (everySecond, between rounds): an extra lane idle */
	:: atomic { select(i : 0 .. NW - 1); aAlive && held[i] && i != primary && !drop[i] -> drop[i] = true; i = 0 }
	/* A crashes: its leases stay until they expire */
	:: atomic { aAlive -> aAlive = false }
	od
}

/* The lane goroutine: claimOne and giveBack. */
proctype LanesA() {
	byte i, r;
	do
	/* claimOne -> Assigner.Claim: a free worker ID, after its reserved
	 * second, reserving up to some second of the horizon */
	:: atomic { aAlive && aClaims < ACLAIMS && !anyPending && !warm[0] && !warm[1] ->
		aClaims++;
		select(i : 0 .. NW - 1);
		if
		/* free, or B's lease expired (its Release forgotten) */
		:: owner[i] != 1 && !held[i] && !releasing[i] && reserved[i] < MAXSEC ->
			written();
			owner[i] = 1;
			after[i] = reserved[i];
			select(r : after[i] + 1 .. MAXSEC);
			reserved[i] = r; res[i] = r; until[i] = after[i];
			lastUsed[i] = 0;
#ifdef MUTANT_LANE_NO_D1
			pending[i] = true; anyPending = true
#else
			warm[i] = true
#endif
		:: true -> skip        /* taken, or the store unreachable */
		fi;
		i = 0; r = 0
	   }
	/* renewOnce of a lane held: its reservation raised to any second of
	 * the horizon (the store's second follows); or ErrLeaseTaken: lost */
	:: atomic { aAlive -> select(i : 0 .. NW - 1);
		if
		:: (held[i] && !drop[i] || warm[i]) && owner[i] == 1 && reserved[i] >= res[i] &&
		   (res[i] < MAXSEC || until[i] < res[i]) ->
			/* applied, reply received: the record held res[i] before
			 * this write, K = 1 write follows it now: durable (D1) */
			written();
			until[i] = max(until[i], res[i]);
			res[i] = min(res[i] + 1, MAXSEC);
			reserved[i] = max(reserved[i], res[i]);
			if
			:: warm[i] && until[i] > after[i] -> warm[i] = false; pending[i] = true; anyPending = true   /* Ready */
			:: else -> skip
			fi
		/* ErrLeaseTaken, or D2: a regression */
		:: (held[i] && !drop[i] || warm[i]) && (owner[i] != 1 || reserved[i] < res[i]) ->
			if
			:: i == primary -> aAlive = false   /* the instance ends */
			:: warm[i] -> warm[i] = false; releasing[i] = true  /* issued nothing */
			:: else -> drop[i] = true           /* dropIdle: lost */
			fi
		:: else -> skip
		fi;
		i = 0
	   }
	/* giveBack: Retire(lane.retireAt()), then Release */
	:: atomic { select(i : 0 .. NW - 1); releasing[i] ->
		releasing[i] = false;
		r = lastUsed[i];
		if :: r == 0 -> r = after[i] :: else -> skip fi;
#ifdef MUTANT_RETIRE_EARLY
		if :: r > 0 -> r-- :: else -> skip fi;
#endif
		if
		:: r > 0 -> r = max(r, after[i])
		:: else -> r = 255          /* nothing to give back */
		fi;
		if
		:: owner[i] == 1 -> written(); reserved[i] = min(reserved[i], r); owner[i] = 0
		:: true -> skip             /* the store unreachable: it expires */
			; if :: owner[i] == 1 -> owner[i] = 0 :: else -> skip fi
		fi;                         /* (after its TTL: free, reservation kept) */
		i = 0; r = 0
	   }
	od
}

/* Instance B: takes a free worker ID, reserves up to some second u,
 * issues IDs of the seconds after the previous holder's up to u (the
 * watched one among them, once), and releases it having used them all.
 * Its own generator's order is A's, checked above. */
proctype B() {
	byte w, a, u;
	do
	:: atomic { bClaims < BCLAIMS ->
		bClaims++;
		select(w : 0 .. NW - 1);
		if
		:: owner[w] != 2 ->         /* free, or A's lease expired: a takeover */
			owner[w] = 2;
			a = reserved[w];
#ifdef MUTANT_TAKEOVER_NO_SKIP
			a = 0;
#endif
			select(u : a .. MAXSEC);
			/* D1: B issues once its reservation is durable; the
			 * store forgets only its last writes: all is durable */
			reserved[w] = u; storeSync();
			if
			:: watchW == w && watchS > a && watchS <= u -> issue(watchW, watchS, watchQ)
			:: else -> skip
			fi;
			written(); owner[w] = 0         /* all used, released */
		:: else -> skip
		fi;
		w = 0; a = 0; u = 0
	   }
	od
}

/* The store: makes its writes durable, or forgets them. */
proctype Store() {
	do
#if K > 1
	/* (K = 1: a loss forgets the last write whatever was synced before
	 * it, and one that forgets nothing is no loss: no step needed) */
	:: atomic { unsynced > 0 -> storeSync() }
#endif
	:: atomic { unsynced > 0 && losses < LOSSES ->
		losses++;
		for (si : 0 .. NW - 1) { owner[si] = sOwner[si]; reserved[si] = sReserved[si] }
		si = 0; unsynced = 0
	   }
	od
}

init {
	byte u;
	atomic {
		select(watchW : 0 .. NW - 1);
		select(watchS : 1 .. MAXSEC);
		select(watchQ : 0 .. NSEQ - 1);
		/* A's first lane: the caller's claim, on a fresh store */
		select(primary : 0 .. NW - 1);
		owner[primary] = 1; select(u : 1 .. MAXSEC); until[primary] = u;
		reserved[primary] = until[primary]; res[primary] = until[primary];
		held[primary] = true;
		storeSync();    /* the dispenser issues once Ready: durable */
		next = 1;
		run PaddingA(); run LanesA(); run B(); run Store()
	}
}
