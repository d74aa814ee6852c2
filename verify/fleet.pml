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
 * new ID for a second up to it. Checked on a ghost record of the seconds
 * issued by each generation (maxOld, minNew), wherever they or the record
 * change (the property macro); the seconds come from the clocks,
 * reservations and floors of the code, never from StartsAfter itself.
 * (The first version of this model drew the new second from above
 * StartsAfter and asserted that it was: vacuous.)
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
 * Issue 31's holes, closed in the model (each with a mutation):
 *   F1  the record (its seal) is read at the stream leader; a direct get
 *       may be answered by a replica one write behind
 *   F2  a lane claim (laneSet.claimOne) checks the generation after its
 *       first reservation, as the first claim does: an old instance paused
 *       past the change may claim a fresh lane (a worker ID no lease held
 *       at the revocation, so not in the horizon)
 *   F3  the new generation's generator has a floor at StartsAfter: it
 *       waits for the local wall clock to pass StartsAfter, and the clock
 *       may step back after the wait
 *
 * Mutations (spin -DMUTANT_...): each must produce a violation.
 *   NO_HORIZON   the new generation starts after the clock, not after the
 *                last second any lease reserved
 *   NO_REVOKE    the old leases are not revoked: a paused instance renews
 *                across the new generation (the PAUSED_OLD finding)
 *   NO_SEAL      the record is not sealed before the revocation: an old
 *                instance reclaims between revocation and record
 *   REPLICA_SEAL F1 removed: the record read by a direct get
 *   LANE_NO_CHECK F2 removed
 *   NO_FLOOR     F3 removed: the generator starts at the clock
 */

#if defined(WITH_LANE) || defined(MUTANT_LANE_NO_CHECK)
#define NOLD 1          /* the lane run: one old instance and its lane */
#else
#define NOLD 2          /* old instances, each on its worker ID */
#endif
/* Two runs: without the lane at the larger bound, and with it (spin
 * -DWITH_LANE, and F2's mutation) at a smaller one. */
#if defined(WITH_LANE) || defined(MUTANT_LANE_NO_CHECK)
#define HAS_LANE 1
#define MAXS_DEFAULT 3
#define CHUNK_DEFAULT 2
#else
#define MAXS_DEFAULT 3
#define CHUNK_DEFAULT 2
#endif
#ifndef MAXS
#define MAXS MAXS_DEFAULT /* wall-clock seconds 1..MAXS */
#endif
#ifndef CHUNK
#define CHUNK CHUNK_DEFAULT
#endif
#define MAXSEC (MAXS + CHUNK)

#define max(a, b) ((a) > (b) -> (a) : (b))
#define min(a, b) ((a) < (b) -> (a) : (b))

/* The store: per worker ID the owner (0 none, else instance + 1), the
 * expired flag and the reserved second; the fleet record. */
byte owner[NOLD + 1];
bool expired[NOLD + 1];
byte reserved[NOLD + 1];
byte generation = 1;
bool sealed = false;    /* the old record, sealed (StartsAfter < 0) */
byte startsAfter = 0;
/* The record one write behind, as a lagging replica answers a direct get
 * (F1). */
#ifdef MUTANT_REPLICA_SEAL
byte prevGeneration = 1;
bool prevSealed = false;
#define recordChanges() prevGeneration = generation; prevSealed = sealed
#else
#define recordChanges() skip
#endif

/* The lane: a worker ID (index NOLD) no lease held before; the first old
 * instance's generator may claim it (F2; one claimer is enough: the other
 * instance's part in it is its own lease's). */
#define LANE NOLD

bool running[NOLD];     /* an old process that may still take steps */

/* Ghost: the highest old second issued, the lowest new second issued. */
byte maxOld = 0;
byte minNew = 255;

/* The property, checked wherever maxOld, minNew or the record change:
 * once the new record exists, the seconds issued by the old generation
 * are up to StartsAfter, the new generation's after it. */
#define property assert(generation == 1 || (maxOld <= startsAfter && minNew > startsAfter))

/* joinFleet / checkGeneration read the record: at the stream leader
 * (F1), or, the mutant's direct get, at a replica one write behind. */
inline readRecord(g, sl) {
	if
	:: g = generation; sl = sealed
#ifdef MUTANT_REPLICA_SEAL
	:: g = prevGeneration; sl = prevSealed
#endif
	fi
}

proctype Old(byte me) {
	byte w = me, res, next, clock, target, lastUsed, laneRes;
	bool lost, checked, lane, g1;
	byte g;
	do
	/* start or reclaim: joinFleet reads the record (only the old one,
	 * unsealed, lets it in), Acquire */
	:: atomic { !running[me] && (owner[w] == 0 || expired[w]) ->
		readRecord(g, g1);
		if
#ifndef MUTANT_NO_SEAL
		:: g == 1 && !g1 ->
#else
		:: g == 1 ->
#endif
			running[me] = true;
			owner[w] = me + 1; expired[w] = false;
			next = reserved[w] + 1; res = reserved[w]; lastUsed = 0; lost = false; checked = false;
			lane = false; laneRes = 0
		:: else -> skip
		fi;
		g = 0; g1 = false
	   }
	/* checkGeneration: after the first reservation (part of the claim),
	 * before serving: the record must be the one joined */
	:: atomic { running[me] && !lost && !checked && res >= next ->
		readRecord(g, g1);
		if
		:: g == 1 && !g1 -> checked = true
#ifdef MUTANT_NO_SEAL
		:: g == 1 && g1 -> checked = true
#endif
		:: else -> lost = true  /* gives the claim up, the instance ends */
		fi;
		g = 0; g1 = false
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
	/* laneSet.claimOne: a fresh lane, its first reservation, then (F2)
	 * the record checked as for the first claim */
#ifdef HAS_LANE
	:: atomic { me == 0 && running[me] && !lost && checked && !lane && (owner[LANE] == 0 || expired[LANE]) ->
		owner[LANE] = me + 1; expired[LANE] = false;
		select(clock : 1 .. MAXS);
		laneRes = min(max(max(clock, next), reserved[LANE] + 1) + CHUNK, MAXSEC);
		reserved[LANE] = max(reserved[LANE], laneRes);
#ifndef MUTANT_LANE_NO_CHECK
		readRecord(g, g1);
		if
		:: g == 1 && !g1 -> lane = true
		:: else -> lost = true  /* ErrGenerationChanged: the instance ends */
		fi;
#else
		lane = true;
#endif
		clock = 0; g = 0; g1 = false
	   }
#endif
	/* pad: an old ID, on the first lane or the extra one */
	:: atomic { running[me] && !lost && checked && (next <= res || (lane && next <= laneRes)) ->
		select(clock : 1 .. MAXS);
		next = max(next, clock);
		if
		:: next <= res || (lane && next <= laneRes) ->
			if
			:: generation > 1 -> assert(next <= startsAfter)
			:: else -> skip
			fi;
			maxOld = max(maxOld, next); property; lastUsed = next; next++
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
		if
		:: lane && owner[LANE] == me + 1 -> owner[LANE] = 0  /* its reservation kept */
		:: else -> skip
		fi;
		running[me] = false; lane = false
	   }
	/* lost for good: reclaim under the old record only */
	:: atomic { running[me] && lost -> running[me] = false; lane = false }
	od
}

/* The store expires a lease at any moment. */
active proctype Expiry() {
	byte w;
	do
	:: atomic { select(w : 0 .. NOLD); owner[w] != 0 && !expired[w] -> expired[w] = true; w = 0 }
	od
}

/* dispenser -new-generation: seal the record (ReplaceFleet),
 * RevokeLeases, LeaseHorizon, NextGeneration, ReplaceFleet; then a new
 * instance serves. Each store operation is a step of its own. */
proctype Operator() {
	byte w, last, clock, s;
	atomic { generation == 1 ->
#ifndef MUTANT_NO_SEAL
		recordChanges();
		sealed = true
#else
		skip
#endif
	}
	/* RevokeLeases: per lease, a compare-and-set that keeps the reserved
	 * second (a renewal lands before it or fails after it) */
	for (w : 0 .. NOLD) {
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
	for (w : 0 .. NOLD) {
		atomic { last = max(last, reserved[w]) }
	}
	atomic {
		select(clock : 1 .. MAXS);
#ifdef MUTANT_NO_HORIZON
		last = clock;
#endif
		startsAfter = max(last, startsAfter);
		recordChanges();
		generation = 2; sealed = false;
		property;                       /* the old IDs issued so far */
		w = 0; last = 0; clock = 0
	}
	/* a new-generation instance: joinFleet waits until the local wall
	 * clock passes StartsAfter, and the generator then starts at the
	 * clock, read again: it may have stepped back since, so the wait
	 * decides nothing and is left out; (F3) the generator's floor at
	 * StartsAfter + 1. Its first ID is the lowest it will ever issue (its
	 * logical second never goes back). */
	atomic { select(clock : 1 .. MAXSEC + 1);
		s = clock;
#ifndef MUTANT_NO_FLOOR
		s = max(s, startsAfter + 1);
#endif
		minNew = s; property;
		clock = 0; s = 0 }
}

init {
	atomic {
		run Old(0);
#if NOLD > 1
		run Old(1);
#endif
		run Operator()
	}
}
