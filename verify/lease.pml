/*
 * Worker-ID leases with reserved seconds: workerid/lease.go on the
 * LeaseStore of workerid/mysqlstore and natsio/kvstore.
 * docs/verification.md maps every step to the Go function it models.
 *
 * Properties
 *   - no (worker ID, second, sequence) is issued twice, across crashes,
 *     restarts, pauses, takeovers, lost and delayed requests and replies,
 *     lagging replica reads and any clock (assertion in Issue);
 *   - a lease is given up as taken (ErrLeaseTaken) only when the store
 *     really stopped naming its owner: another claim took the worker ID,
 *     or a loss forgot the claim (assertion in Renew against the ghost
 *     record dispossessed[], which only the store's steps set; a lagging
 *     replica's "not yours" must not count).
 *
 * One ID is watched (its second chosen nondeterministically at the start,
 * so every second is watched in some run): the model counts how often it
 * is issued. This keeps the state small without losing a duplicate: a
 * duplicate of any ID is one of the watched ID in the run that watches
 * it. One worker ID stands for all (see NW), and one sequence number per
 * second for all: a lease that issues (w, s, q) issued (w, s, 0) before
 * it (padding starts every second at sequence 0), so a duplicate of
 * (w, s, q) is one of (w, s, 0). The sequence within a second is
 * padding's own: lanes.pml checks it with two per second.
 *
 * Environment, at every step:
 *   - an instance crashes (its local state is gone; its lease stays in the
 *     store until it expires) and restarts;
 *   - an instance pauses for any length (spin runs the others meanwhile);
 *   - a store request fails for one instance and not the other;
 *   - a request is applied and its reply lost, or delayed and applied any
 *     time later, or lost;
 *   - a lease expires at any moment: Acquire may take any worker ID over.
 *     This covers every TTL, every pause past it and every clock skew
 *     between the store and the instances (timing decides when a worker
 *     ID is recycled, never whether an ID is unique);
 *   - a KV read is answered by a replica that lags;
 *   - the store forgets its last k <= K acknowledged writes (a power loss
 *     with lazy fsync, a failover to a replica that lacks them): it comes
 *     back as it was before them, up to LOSSES times in the run. K stands
 *     for the window W of DISPENSER_STORE_LOSS_WINDOW: a write followed by
 *     K more is never forgotten, as one older than W is not. A request in
 *     flight at the loss is lost with its connection;
 *   - the wall clock reads any second 1..MAXS at every read, forward or
 *     back; the reservation a renewal asks for is any the code could ask
 *     for with such a clock and any demand.
 *
 * Mutations (spin -DMUTANT_...): each must produce a violation.
 *   TAKEOVER_NO_SKIP    a takeover ignores the previous owner's reserved
 *                       second (Grant.PrevReserved read as 0)
 *   RESERVE_BEFORE_ACK  the instance counts a reservation as made when
 *                       the store did not confirm it (the request lost)
 *   REPLICA_WORD        a renewal gives the lease up on a lagging
 *                       replica's read, not the leader's
 *   NO_LOSS_MARGIN      D1 removed: the generator issues up to the
 *                       acknowledged reservation, not only up to the one
 *                       known durable
 *   NO_REGRESSION_CHECK D2 removed: a renewal that finds the record older
 *                       than what this owner wrote renews it all the same
 *                       (and counts it as confirming the older writes)
 *
 * Defenses against the loss (DURABILITY-DESIGN.md, MODELS-FINDINGS.md):
 *   D1  an owner issues a second only once the reservation covering it is
 *       durable: confirmed present in the record by a renewal that K more
 *       acknowledged, regression-free renewals followed (in time: a
 *       renewal at least W after it). A claim needs no margin then: no
 *       owner ever issued beyond what the store cannot forget.
 *   D2  every renewal compares the record with what this owner last wrote
 *       (the reservation acknowledged); an older record is a regression:
 *       the owner stops issuing at once and claims again.
 *
 * Finding (spin -DDESIGN_CLAIM_MARGIN, expected to fail): D1 as first
 * designed, a takeover margin (a claim starts after the recorded
 * reservation plus MARGIN) with the owner issuing up to its acknowledged
 * reservation, does not close the hole: the forgotten writes can be the
 * previous owner's claim and renewal themselves, and both claims then
 * start after the same recorded second (see MODELS-FINDINGS.md).
 */

#define NI 2            /* instances */
/* One worker ID: the instances contend for it. Leases of different
 * worker IDs issue disjoint IDs and no step reads another worker ID's
 * lease, and Acquire may take any worker ID at any moment here, so the
 * behaviours of every worker ID are those of this one (spin -DNW=2 runs
 * two, with many more states). */
#ifndef NW
#define NW 1
#endif
#ifndef MAXS
#define MAXS 2          /* wall-clock seconds 1..MAXS */
#endif
#ifndef CHUNK
#define CHUNK 1         /* reserve chunk, seconds */
#endif
#define MAXSEC (MAXS + CHUNK)  /* horizon of reservations */
#ifndef K
#ifdef DESIGN_CLAIM_MARGIN
#define K 2             /* the claim and a renewal forgotten together */
#else
#define K 1             /* the store forgets at most its last K writes */
#endif
#endif
#ifndef LOSSES
#define LOSSES 2        /* losses in the whole run */
#endif
#ifndef MARGIN
#define MARGIN 1        /* DESIGN_CLAIM_MARGIN's takeover margin */
#endif
#ifndef MAXCLAIMS
#define MAXCLAIMS 2     /* claims in the whole run (fresh tokens) */
#endif

#define max(a, b) ((a) > (b) -> (a) : (b))
#define min(a, b) ((a) < (b) -> (a) : (b))

/* The store as its leader has it: owner token (0: released or never
 * used) and reserved second. */
byte owner[NW];
byte reserved[NW];
/* What a loss comes back to: the record as of the last write the store
 * made durable, and how many acknowledged writes it may still forget. */
byte sOwner[NW];
byte sReserved[NW];
byte unsynced = 0;
byte losses = 0;
byte si;

byte tokens = 0;        /* tokens handed out so far */

/* Ghost: the store stopped naming token t as owner by a step that was not
 * t's own (another claim, a loss). */
bool dispossessed[MAXCLAIMS + 1];

/* A delayed request (one in flight at a time, of any instance): it
 * lands later, or never. */
#define REQ_NONE 0
#define REQ_RENEW 1
#define REQ_RELEASE 2
byte dKind, dW, dTok, dVal;

/* The watched ID (worker 0, second watchS, sequence 0) and how often it
 * was issued. */
byte watchS;
byte watchCount = 0;

/* The store makes what it holds durable (an fsync, a replica catching
 * up): a loss comes back to it. */
inline sync() {
	for (si : 0 .. NW - 1) { sOwner[si] = owner[si]; sReserved[si] = reserved[si] }
	si = 0; unsynced = 0
}
/* Every write: at most K acknowledged writes are ever forgotten. */
inline written() {
	if
	:: unsynced == K -> sync()
	:: else -> skip
	fi;
	unsynced++
}

/* LeaseStore.Acquire, .Renew and .Release, each one atomic operation
 * (MySQL: one UPDATE ... WHERE OWNER_TOKEN = ?; KV: read, then Update at
 * the revision read, retried on a lost race: linearised at the successful
 * Update). */
inline storeAcquire(w, tok) {
	written();
	if
	:: owner[w] != 0 -> dispossessed[owner[w]] = true
	:: else -> skip
	fi;
	owner[w] = tok
}
inline storeRenew(w, tok, val) {
	if
	:: owner[w] == tok -> written(); reserved[w] = max(reserved[w], val)
	:: else -> skip
	fi
}
inline storeRelease(w, tok, val) {
	if
	:: owner[w] == tok -> written(); owner[w] = 0; reserved[w] = min(reserved[w], val)
	:: else -> skip
	fi
}

/* The network: a delayed request lands at the store any time later, or
 * is dropped. */
active proctype Network() {
	do
	:: atomic {
		if
		:: dKind == REQ_RENEW -> storeRenew(dW, dTok, dVal)
		:: dKind == REQ_RELEASE -> storeRelease(dW, dTok, dVal)
		:: dKind != REQ_NONE -> skip        /* dropped */
		fi;
		dKind = REQ_NONE; dW = 0; dTok = 0; dVal = 0
	   }
	/* The store makes its writes durable. */
	:: atomic { unsynced > 0 -> sync() }
	/* The store forgets what it has not made durable: it comes back as it
	 * was; a request in flight is lost with its connection. */
	:: atomic { unsynced > 0 && losses < LOSSES ->
		losses++;
		for (si : 0 .. NW - 1) {
			if
			:: owner[si] != sOwner[si] && owner[si] != 0 -> dispossessed[owner[si]] = true
			:: else -> skip
			fi;
			owner[si] = sOwner[si]; reserved[si] = sReserved[si]
		}
		si = 0; unsynced = 0;
		dKind = REQ_NONE; dW = 0; dTok = 0; dVal = 0
	   }
	od
}

proctype Instance(byte me) {
	byte tok, w, after, res, base, target;
	byte vres;              /* D1: the reservation known durable */
#if K > 1
	byte h1;                /* confirmed one renewal ago (K = 2) */
#endif
	byte next, lastUsed, clock;
	bool gen;               /* a generator runs on the lease */
	bool lost;              /* lease lost for good (ErrLeaseTaken, regression) */
	byte i;

restart:
	tok = 0; w = 0; after = 0; res = 0; vres = 0; next = 0;
#if K > 1
	h1 = 0;
#endif
	lastUsed = 0; gen = false; lost = false;

	do
	/* Crash at any step; the restart knows nothing but the store. */
	:: tok != 0 -> goto restart

	/* ClaimLease -> LeaseStore.Acquire. */
	:: atomic { tok == 0 && tokens < MAXCLAIMS ->
		tokens++;
		select(i : 0 .. NW - 1);   /* free, released or expired: any */
		if
		:: true ->              /* applied; reply received */
			storeAcquire(i, tokens);
			tok = tokens; w = i; after = reserved[i];
#ifdef MUTANT_TAKEOVER_NO_SKIP
			after = 0;
#endif
#ifdef DESIGN_CLAIM_MARGIN
			after = min(after + MARGIN, MAXSEC);
#endif
			lost = false; gen = false; res = 0; vres = 0; lastUsed = 0; next = 0
#if K > 1
			; h1 = 0
#endif
		/* applied with its reply lost: the same as a crash right after */
		:: true -> skip         /* store unreachable, request lost */
		fi;
		i = 0
	   }

	/* Lease.renewOnce: the first reservation, the heartbeat and the
	 * wake-up of Reserve. */
	:: atomic { tok != 0 && !lost ->
		/* Lease.target: max(clock, demanded, PrevReserved+1), a chunk
		 * beyond it when less than half a chunk is left. */
		select(base : after + 1 .. MAXSEC);
		if
		:: res < base + (CHUNK + 1) / 2 -> target = min(base + CHUNK, MAXSEC)
		:: else -> target = res
		fi;
		/* kvLeaseStore.readLease: a direct get may be answered by a
		 * replica that lags, showing an earlier owner or none. */
		if
		:: true -> skip         /* the copy read is current */
		:: true ->              /* a lagging copy: not ours */
#ifdef MUTANT_REPLICA_WORD
			assert(dispossessed[tok]);  /* given up on the replica's word */
			lost = true
#else
			skip                /* confirmed at the stream leader */
#endif
		fi;
		if
		:: lost -> skip
		:: owner[w] != tok ->   /* ErrLeaseTaken, the leader's word */
			assert(dispossessed[tok]);
			lost = true
#ifndef MUTANT_NO_REGRESSION_CHECK
		:: owner[w] == tok && reserved[w] < res ->
			/* D2: older than what this owner wrote: a regression. It
			 * stops issuing at once and claims again. */
			lost = true
		:: owner[w] == tok && reserved[w] >= res ->
#else
		:: owner[w] == tok ->
#endif
			if
			:: true ->          /* applied, reply received */
				storeRenew(w, tok, target);
				/* D1: what the record was confirmed to hold before this
				 * write is durable once K acknowledged writes follow. */
#if K > 1
				vres = max(vres, h1); h1 = res;
#else
				vres = max(vres, res);
#endif
				res = max(res, target);
				if
				:: !gen -> gen = true; select(clock : 1 .. MAXS); next = clock
				:: else -> skip
				fi
			:: true ->          /* applied, reply lost */
				storeRenew(w, tok, target)
			:: dKind == REQ_NONE ->  /* delayed: lands later or never */
				dKind = REQ_RENEW; dW = w; dTok = tok; dVal = target
			:: true ->          /* lost, or the store unreachable */
#ifdef MUTANT_RESERVE_BEFORE_ACK
				res = max(res, target); vres = res;
				if
				:: !gen -> gen = true; select(clock : 1 .. MAXS); next = clock
				:: else -> skip
				fi
#else
				skip
#endif
			fi
		fi;
		base = 0; target = 0; clock = 0
	   }

	/* ClaimLease: the first reservation failed: give the worker ID back
	 * with PrevReserved (no ID was issued). */
	:: atomic { tok != 0 && !gen && !lost ->
		if
		:: true -> storeRelease(w, tok, after)
		:: dKind == REQ_NONE ->
			dKind = REQ_RELEASE; dW = w; dTok = tok; dVal = after
		:: true -> skip
		fi;
		tok = 0
	   }

	/* CachedGenerator.pad: the next ID, under lane.usableFor. */
	:: atomic { gen && !lost && next <= MAXSEC ->
		select(clock : 1 .. MAXS);
		if :: clock > next -> next = clock :: else -> skip fi;
#if defined(MUTANT_NO_LOSS_MARGIN) || defined(DESIGN_CLAIM_MARGIN)
		target = res;           /* the acknowledged reservation */
#else
		target = vres;          /* D1: only what the store cannot forget */
#endif
		if
		:: next <= after -> next++    /* errBeforeAfter: skip it */
		:: next > after && next > target -> skip  /* ErrNotReserved: Reserve */
		:: next > after && next <= target ->
			if
			:: w == 0 && next == watchS ->
				watchCount++;
				assert(watchCount <= 1)
			:: else -> skip
			fi;
			lastUsed = next;
			next++
		fi;
		clock = 0; target = 0
	   }

	/* Lost for good: the dispenser claims a new worker ID (Release of a
	 * lost lease writes nothing): Dispenser.reclaim, or at start, lost
	 * before its first durable reservation (vres not past after: nothing
	 * issued), Dispenser.awaitFirstDurable. */
	:: atomic { tok != 0 && lost -> tok = 0; gen = false }

	/* A graceful stop (SIGTERM) or a lane given back: Retire at the last
	 * second used, then Release with usedUpTo. */
	:: atomic { gen && !lost ->
		if :: lastUsed == 0 -> lastUsed = after :: else -> skip fi;
		if
		:: lastUsed > 0 -> target = max(lastUsed, after)
		:: else -> target = 255     /* math.MaxInt64: keep the reservation */
		fi;
		if
		:: true -> storeRelease(w, tok, target)
		:: dKind == REQ_NONE ->
			dKind = REQ_RELEASE; dW = w; dTok = tok; dVal = target
		:: true -> skip         /* store unreachable: the lease expires */
		fi;
		tok = 0; gen = false; target = 0
	   }
	od
}

init {
	byte i;
	atomic {
		select(watchS : 1 .. MAXSEC);
		for (i : 0 .. NI - 1) { run Instance(i) }
	}
}
