/*
 * The Go client's lock-free take: natsio/uidclient/rangechain.go, shared
 * by Prefetcher.Next and BlockSource.Next/NextN. docs/verification.md
 * ("The Go client's lock-free take") maps each step to the Go code.
 *
 * The IDs at hand are a chain of runs. One producer (the owner's
 * fetcher) links each new run as the tail's successor, then publishes a
 * new state (version here: chainState.changed closed). A taker:
 *   take     r = cur; n = r.taken++ (one atomic add); n < count: the ID
 *            (r, n) is its own;
 *   advance  otherwise: cur moved already -> take again; r has a
 *            successor s -> CAS cur from r to s, take again; none -> read
 *            the state, look at the successor again, and wait for the
 *            state to change.
 *
 * Properties
 *   - no ID (run, index) is handed out twice;
 *   - no taker waits for ever while IDs are at hand: every taker gets
 *     its IDs (the producer links all NRUNS*COUNT of them, as many as the
 *     takers want), checked by a monitor when no process can move.
 *
 * Mutations (spin -DMUTANT_...): each must produce a violation.
 *   ADD_NOT_ATOMIC     the add is a load and a store: two takers read one
 *                      index
 *   PUBLISH_BEFORE_LINK  the producer publishes the new state before it
 *                      links the run: a taker that read the old state
 *                      after looking at the successor waits for ever
 *                      (the lost wake-up)
 *   NO_RECHECK         the taker waits on the state without looking at
 *                      the successor again after reading it
 */

#define NRUNS 2
#define COUNT 2
#define TAKERS 2
#define WANT 2 /* per taker: TAKERS*WANT == NRUNS*COUNT */
#define SLOTS (NRUNS + 1) /* slot 0: the empty run the chain starts with */

byte count[SLOTS];
byte taken[SLOTS];
byte succ[SLOTS]; /* 0: none (slot 0 is never a successor) */
byte id[SLOTS];   /* the first ID of the run in the slot */
byte cur = 0;
byte version = 0; /* the published state */
byte issued[NRUNS * COUNT];
byte done = 0;    /* takers that got all they want */

proctype Producer() {
	byte tail = 0, next = 1, first = 0;
	do
	:: next <= NRUNS ->
		count[next] = COUNT;
		id[next] = first;
		first = first + COUNT;
#ifdef MUTANT_PUBLISH_BEFORE_LINK
		version++;
		succ[tail] = next;
#else
		succ[tail] = next;
		version++;
#endif
		tail = next;
		next++
	:: else -> break
	od
}

proctype Taker() {
	byte r, n, s, v, got = 0;
	do
	:: got == WANT -> break
	:: else ->
		r = cur;
#ifdef MUTANT_ADD_NOT_ATOMIC
		n = taken[r];
		taken[r] = n + 1;
#else
		atomic { n = taken[r]; taken[r]++ }
#endif
		if
		:: n < count[r] ->
			atomic {
				issued[id[r] + n]++;
				assert(issued[id[r] + n] == 1)
			}
			got++
		:: else ->
advance:
			if
			:: cur != r -> skip /* another taker moved on: take again */
			:: else ->
				s = succ[r];
				if
				:: s != 0 ->
					atomic { if :: cur == r -> cur = s :: else -> skip fi }
				:: else ->
					v = version;
#ifndef MUTANT_NO_RECHECK
					if
					:: succ[r] != 0 -> goto advance
					:: else -> skip
					fi;
#endif
					(version != v) /* wait for the state to change */
				fi
			fi
		fi
	od;
	done++
}

/* When nothing can move, every taker must have got its IDs. */
active proctype Monitor() {
	timeout -> assert(done == TAKERS)
}

init {
	atomic {
		run Producer();
		run Taker();
		run Taker()
	}
}
