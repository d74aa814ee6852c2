/*
 * Bulk takes: CachedGenerator.ReserveRuns (uidcore/reserve.go), answered
 * on the padding goroutine, beside uid.next's takers (uidcore/ring.go).
 * docs/verification.md ("reserve.pml") maps each step to the Go code.
 *
 * One lane: padding's logical second and next sequence on it (PER IDs a
 * second, seconds 1..NSEC), its after (seconds an earlier holding may
 * have used) and lastUsed. A ring of RING slots between cursor and tail.
 * Processes:
 *   Padding  one goroutine, at any step one of:
 *     round    write the lane's next IDs into free slots, then publish
 *              the tail (padding.fill, writeRun, publishRun);
 *     answer   a reservation of WANT IDs (answerReservation): take what
 *              the ring holds by CAS on the cursor, leaving a reserve of
 *              one while throttled (takeFromRing); maybe refill the ring
 *              and take again (the lanes have room); then, only once the
 *              ring is empty, reserve the rest straight from the lane
 *              (fill with a sink: chooseLane, reserveRun, advance);
 *     retire   with the ring empty, give the lane back at retireAt and
 *              claim it again as a new holding whose clock reads an
 *              early second: it starts after retireAt (usableFor).
 *   Taker    uid.next (Next): read cursor and tail, CAS the cursor one
 *            on; the slot it passed is its ID.
 * A ghost array counts every ID handed out, a ghost the last one.
 *
 * Properties
 *   - no ID handed out twice (a slot taken once, taker or reservation;
 *     the lane's sequence moves past a reserved run before padding
 *     writes the lane again);
 *   - no run starts at or below a second the lane has retired;
 *   - IDs strictly increase in issue order (no reserved run lies above
 *     an ID still in the ring).
 *
 * Mutations (spin -DMUTANT_...): each must produce a violation.
 *   RESERVE_BEFORE_RING_EMPTY  reserve from the lane while the ring still
 *                      holds the reserve: the taker then gets a lower ID
 *   NO_ADVANCE         the lane's sequence does not move past a reserved
 *                      run: padding writes its IDs again
 *   TAKE_NOT_CAS       the taker reads the cursor, then stores it: the
 *                      reservation's CAS between takes the same slot
 *   NO_LAST_USED       a reserved run does not set the lane's lastUsed:
 *                      the lane is retired below a second it issued
 */

#define PER 2
#define NSEC 2
#define RING 2
#define WANT 2
#define RESERVATIONS 2
#define TAKES 2
#define ID(s, q) ((s) * PER + (q))
#define NID ((NSEC + 1) * PER)

byte sec = 1;       /* padding.nextSecond */
byte seq = 0;       /* padding.nextSeq */
byte after = 0;     /* lane.after */
byte lastUsed = 0;  /* lane.lastUsed */
byte slot[RING];
byte cursor = 0;
byte tail = 0;

/* ghosts */
byte issued[NID];
byte last = 0;      /* the last ID handed out (0: none; IDs start at PER) */
byte maxSec = 0;    /* the highest second written or reserved */
byte retired = 0;   /* the highest second the earlier holding used */

/* An ID handed out: once, above the last one. */
inline issue(x) {
	issued[x]++;
	assert(issued[x] == 1);
	assert(x > last);
	last = x
}

/* A run of the lane starts at sec: above what the lane retired. */
inline used() {
	assert(sec > retired);
	if :: sec > maxSec -> maxSec = sec :: else -> skip fi
}

/* usableFor: seconds up to after are not this holding's. */
inline chooseLane() {
	if :: sec <= after -> sec = after + 1; seq = 0 :: else -> skip fi
}

/* advance: the sequence moves past n IDs for good. */
inline advance(n) {
	seq = seq + n;
	if :: seq == PER -> sec++; seq = 0 :: else -> skip fi
}

/* One padding round: IDs into free slots, one published at a time. */
inline round() {
	do
	:: atomic { tail - cursor < RING && sec <= NSEC && after < NSEC ->
		chooseLane();
		used();
		slot[tail % RING] = ID(sec, seq);
		lastUsed = sec;
		advance(1);
		tail++ }
	:: break
	od
}

/* takeFromRing: what the ring holds, by CAS on the cursor. */
inline takeFromRing() {
	do
	:: atomic {
		c = cursor; t = tail;
		if :: throttled && t > c -> t-- :: else -> skip fi /* the reserve */
	   }
		if
		:: c >= t -> break
		:: else ->
			k = t - c;
			if :: k > WANT - got -> k = WANT - got :: else -> skip fi;
			d_step {
				if
				:: cursor == c ->
					cursor = c + k;
					i = 0;
					do
					:: i < k -> issue(slot[(c + i) % RING]); i++
					:: else -> break
					od;
					got = got + k;
					ok = 1
				:: else -> ok = 0
				fi
			};
			if :: ok -> break :: else -> skip fi
		fi
	od
}

/* The rest straight from the lane, as a round with a sink. */
inline reserveFromLane() {
	do
	:: got < WANT ->
		d_step {
			chooseLane();
			if
			:: sec > NSEC -> ok = 0 /* the bound: no more seconds */
			:: else ->
				used();
				k = PER - seq;
				if :: k > WANT - got -> k = WANT - got :: else -> skip fi;
				i = 0;
				do
				:: i < k -> issue(ID(sec, seq + i)); i++
				:: else -> break
				od;
				got = got + k;
#ifndef MUTANT_NO_LAST_USED
				lastUsed = sec;
#endif
#ifndef MUTANT_NO_ADVANCE
				advance(k);
#endif
				ok = 1
			fi
		};
		if :: ok -> skip :: else -> break fi
	:: else -> break
	od
}

proctype Padding() {
	byte c, t, k, i, got, left = RESERVATIONS;
	bit throttled, ok, gaveBack;
	do
	:: round()
	:: left > 0 ->
		left--;
		got = 0;
		if :: throttled = 0 :: throttled = 1 fi;
		takeFromRing();
		if
		:: got < WANT && cursor < tail -> /* the lanes have room */
			round();
			takeFromRing()
		:: true -> skip
		fi;
		if
		:: cursor >= tail -> reserveFromLane()
#ifdef MUTANT_RESERVE_BEFORE_RING_EMPTY
		:: cursor < tail -> reserveFromLane()
#else
		:: cursor < tail -> skip
#endif
		fi
	:: atomic { !gaveBack && cursor == tail ->
		gaveBack = 1;
		retired = maxSec;
		if :: lastUsed > 0 -> after = lastUsed :: else -> skip fi; /* retireAt */
		lastUsed = 0;
		sec = 1; seq = 0 /* the new holding's clock: any second */
	   }
	:: break
	od
}

proctype Taker() {
	byte c, t, took = 0;
	do
	:: took == TAKES -> break
	:: else ->
		atomic { c = cursor; t = tail };
		if
		:: c >= t -> (cursor != c || tail != t) /* awaitPadding */
		:: else ->
#ifdef MUTANT_TAKE_NOT_CAS
			d_step { cursor = c + 1; issue(slot[c % RING]) };
			took++
#else
			d_step {
				if
				:: cursor == c -> cursor = c + 1; issue(slot[c % RING]); took++
				:: else -> skip
				fi
			}
#endif
		fi
	od
}

init {
	atomic {
		run Padding();
		run Taker()
	}
}
