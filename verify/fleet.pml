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
 * the reserved second, lowered to the last one used), restart or reclaim
 * while the record lets them in; an old instance pauses, or is cut off
 * from the store, for any length at any step, before, during or after
 * `dispenser -new-generation` (it simply takes no steps meanwhile); a
 * lease expires at any moment; a renewal or release is lost; each
 * instance's clock reads any second 1..MAXS. No obligation on stopping
 * the old instances is encoded: the refusal of live leases
 * (nextGeneration's live > 0) is left out, safety does not rest on it.
 *
 * The fix of the PAUSED_OLD finding (docs/verification.md, "Findings"):
 * the operator seals the record, revokes every lease (one at a time, as
 * the KV store does; MySQL's single UPDATE is one of these
 * interleavings), reads the horizon, then records the new generation; an
 * old instance checks the record after its claim's first reservation.
 *
 * Mutations (spin -DMUTANT_...): each must produce a violation.
 *   NO_HORIZON   the new generation starts after the clock, not after the
 *                last second any lease reserved
 *   NO_REVOKE    the old leases are not revoked: a paused instance renews
 *                across the new generation (the PAUSED_OLD finding)
 *   NO_SEAL      the record is not sealed before the revocation: an old
 *                instance reclaims between revocation and record
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
bool sealed = false;    /* the old record, sealed (StartsAfter < 0) */
byte startsAfter = 0;

bool running[NOLD];     /* an old process that may still take steps */

/* Ghost: the highest old second issued, the lowest new second issued. */
byte maxOld = 0;
byte minNew = 255;

proctype Old(byte me) {
	byte w = me, res, next, clock, target, lastUsed;
	bool lost, checked;
	do
	/* start or reclaim: joinFleet reads the record (only the old one,
	 * unsealed, lets it in), Acquire */
	:: atomic { !running[me] && generation == 1 &&
#ifndef MUTANT_NO_SEAL
		!sealed &&
#endif
		(owner[w] == 0 || expired[w]) ->
		running[me] = true;
		owner[w] = me + 1; expired[w] = false;
		next = reserved[w] + 1; res = reserved[w]; lastUsed = 0; lost = false; checked = false
	   }
	/* checkGeneration: after the first reservation (part of the claim),
	 * before serving: the record must be the one joined */
	:: atomic { running[me] && !lost && !checked && res >= next ->
		if
		:: generation == 1 && !sealed -> checked = true
#ifdef MUTANT_NO_SEAL
		:: generation == 1 && sealed -> checked = true
#endif
		:: else -> lost = true  /* gives the claim up, the instance ends */
		fi
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
	:: atomic { running[me] && !lost && checked && next <= res ->
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

/* dispenser -new-generation: seal the record (ReplaceFleet),
 * RevokeLeases, LeaseHorizon, NextGeneration, ReplaceFleet; then a new
 * instance serves. Each store operation is a step of its own. */
proctype Operator() {
	byte w, last, clock, s;
	atomic { generation == 1 ->
#ifndef MUTANT_NO_SEAL
		sealed = true
#else
		skip
#endif
	}
	/* RevokeLeases: per lease, a compare-and-set that keeps the reserved
	 * second (a renewal lands before it or fails after it) */
	for (w : 0 .. NOLD - 1) {
		atomic {
#ifndef MUTANT_NO_REVOKE
			owner[w] = 0; expired[w] = false
#else
			skip
#endif
		}
	}
	/* LeaseHorizon: per lease, read at the leader */
	last = 0;
	for (w : 0 .. NOLD - 1) {
		atomic { last = max(last, reserved[w]) }
	}
	atomic {
		select(clock : 1 .. MAXS);
#ifdef MUTANT_NO_HORIZON
		last = clock;
#endif
		startsAfter = max(last, startsAfter);
		generation = 2; sealed = false;
		assert(maxOld <= startsAfter);  /* the old IDs issued so far */
		w = 0; last = 0; clock = 0
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
