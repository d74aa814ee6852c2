/*
 * Fleet generations: dispenser/fleet.go (nextGeneration, joinFleet) and
 * workerid/fleet.go (NextGeneration) over the leases of lease.pml.
 * docs/verification.md maps every step to the Go function it models.
 *
 * Property: every ID of the new generation is above every ID of the old
 * one. NextGeneration's arithmetic (unit-tested in workerid/fleet_test.go)
 * makes every new-layout ID of a second after StartsAfter larger than
 * every old-layout ID of a second up to the horizon it is given; so the
 * property is: no old ID is issued for a second after StartsAfter, and no
 * new ID for a second up to it (assertions in the issue steps).
 *
 * Environment, at every step: old instances crash or stop (Release keeps
 * the reserved second, lowered to the last one used) and restart while
 * the old record holds; a lease expires at any moment; a renewal or
 * release is lost; each instance's clock reads any second 1..MAXS.
 *
 * The operator's obligation (docs/operations.md): every old instance has
 * stopped before `dispenser -new-generation`, and none starts during it.
 * The model encodes it: the new generation is recorded only while no old
 * instance runs. With -DPAUSED_OLD an old instance may instead be merely
 * paused or cut off from the store past its lease: that run is a known
 * counterexample (see docs/verification.md, "Findings").
 *
 * Mutations (spin -DMUTANT_...): each must produce a violation.
 *   NO_HORIZON   the new generation starts after the clock, not after the
 *                last second any lease reserved
 */

#define NOLD 2          /* old instances, each on its worker ID */
#define MAXS 3          /* wall-clock seconds 1..MAXS */
#define CHUNK 2
#define MAXSEC (MAXS + CHUNK)

#define max(a, b) ((a) > (b) -> (a) : (b))
#define min(a, b) ((a) < (b) -> (a) : (b))

/* The store: per worker ID the owner (0 none, else instance + 1), the
 * expired flag and the reserved second; the fleet record. */
byte owner[NOLD];
bool expired[NOLD];
byte reserved[NOLD];
byte generation = 1;
byte startsAfter = 0;

bool running[NOLD];     /* an old process that may still take steps */

/* Ghost: the highest old second issued, the lowest new second issued. */
byte maxOld = 0;
byte minNew = 255;

proctype Old(byte me) {
	byte w = me, res, next, clock, target, lastUsed;
	bool lost;
	do
	/* start: joinFleet reads the record; only the old one lets it in */
	:: atomic { !running[me] && generation == 1 && (owner[w] == 0 || expired[w]) ->
		running[me] = true;
		owner[w] = me + 1; expired[w] = false;
		next = reserved[w] + 1; res = reserved[w]; lastUsed = 0; lost = false
	   }
	/* renewOnce: owner matches, expired or not */
	:: atomic { running[me] && !lost ->
		select(clock : 1 .. MAXS);
		target = min(max(clock, next) + CHUNK, MAXSEC);
		if
		:: owner[w] == me + 1 -> reserved[w] = max(reserved[w], target); res = max(res, target); expired[w] = false
		:: owner[w] != me + 1 -> lost = true
		:: true -> skip         /* lost, store unreachable */
		fi;
		clock = 0; target = 0
	   }
	/* pad: an old ID */
	:: atomic { running[me] && !lost && next <= res ->
		select(clock : 1 .. MAXS);
		next = max(next, clock);
		if
		:: next <= res ->
			if
			:: generation > 1 -> assert(next <= startsAfter)
			:: else -> skip
			fi;
			maxOld = max(maxOld, next); lastUsed = next; next++
		:: else -> skip
		fi;
		clock = 0
	   }
	/* stop (SIGTERM: Retire, Release) or crash */
	:: atomic { running[me] ->
		if
		:: owner[w] == me + 1 && lastUsed > 0 -> owner[w] = 0; reserved[w] = min(reserved[w], lastUsed)
		:: owner[w] == me + 1 -> owner[w] = 0
		:: true -> skip         /* crashed, or the release lost: it expires */
		fi;
		running[me] = false
	   }
	/* lost for good: reclaim under the old record only */
	:: atomic { running[me] && lost -> running[me] = false }
	od
}

/* The store expires a lease at any moment. */
active proctype Expiry() {
	byte w;
	do
	:: atomic { select(w : 0 .. NOLD - 1); owner[w] != 0 && !expired[w] -> expired[w] = true; w = 0 }
	od
}

/* dispenser -new-generation: LeaseHorizon, refuse a live lease,
 * NextGeneration, ReplaceFleet; then a new instance serves. */
proctype Operator() {
	byte w, last, live, clock, s;
	atomic {
#ifdef PAUSED_OLD
		true;
#else
		!running[0] && !running[1];     /* the operator's obligation */
#endif
		last = 0; live = 0;
		for (w : 0 .. NOLD - 1) {
			last = max(last, reserved[w]);
			if :: owner[w] != 0 && !expired[w] -> live++ :: else -> skip fi
		}
		live == 0;                      /* else it refuses (blocks here) */
		select(clock : 1 .. MAXS);
#ifdef MUTANT_NO_HORIZON
		last = clock;
#endif
		startsAfter = max(last, startsAfter);
		generation = 2;
		assert(maxOld <= startsAfter)   /* the old IDs issued so far */
	}
	/* a new-generation instance: waits for StartsAfter+1, then serves */
	do
	:: atomic { select(s : startsAfter + 1 .. MAXSEC + 1);
		assert(s > startsAfter);
		minNew = min(minNew, s) }
	:: break
	od
}

init {
	atomic {
		run Old(0); run Old(1); run Operator()
	}
}
