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
 * Mutations (spin -DMUTANT_...): each must produce a violation.
 *   GIVEBACK_NO_CAS  the give-back lowers the sequence's end when the
 *                    value read says so, without the compare-and-set
 *   TAKE_NO_CAS      a take writes the end it read plus the step without
 *                    the revision check
 */

#define NI 2            /* instances */
#ifndef MAXN
#define MAXN 5          /* numbers 0..MAXN-1 */
#endif
#define MINSTEP 1
#define MAXSTEP 2
#ifndef MAXTAKES
#define MAXTAKES 3      /* takes in the whole run */
#endif

/* The store (the key seq.<name> at the stream leader): the end of the
 * last segment taken and the key's revision; and the version before it,
 * which a lagging replica may still answer with. */
byte end = 0;
byte rev = 1;
byte prevEnd = 0;
byte prevRev = 0;       /* 0: no earlier version */

byte takes = 0;

/* One write in flight: (new end, revision it expects). */
bool dOn;
byte dEnd, dRev;

byte watchN;
byte watchCount = 0;

/* kv.Update at a revision: applied only if the key is still at it. */
inline update(newEnd, atRev, ok) {
	if
	:: atRev == rev -> prevEnd = end; prevRev = rev; end = newEnd; rev++; ok = true
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
	od
}

proctype Instance(byte me) {
	/* held[0] = [f0, t0), held[1] = [f1, t1) (the double buffer) */
	byte f0, t0, f1, t1;
	byte step, last, n, e, r;
	bool any, ok, closing;

restart:
	f0 = 0; t0 = 0; f1 = 0; t1 = 0; step = MINSTEP; last = 0; any = false; closing = false;
	do
	/* Abandon (killed): what is held is lost. */
	:: !closing -> goto restart

	/* startFetch -> SequenceStore.Take: when fewer than two segments
	 * are held (await on an empty one, maybePrefetch on a used one). */
	:: atomic { !closing && t1 == f1 && takes < MAXTAKES ->
		takes++;
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
				if
				:: ok && t0 == f0 -> f0 = e; t0 = e + step
				:: ok && t0 != f0 -> f1 = e; t1 = e + step
				:: !ok -> skip              /* lost race: it reads again */
				fi
			:: true -> update(e + step, r, ok)   /* applied, reply lost */
			:: !dOn -> dOn = true; dEnd = e + step; dRev = r  /* delayed */
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
	:: !closing -> closing = true
	:: atomic { closing ->
		if
		:: t1 > f1 -> n = 1
		:: t1 == f1 && t0 > f0 -> n = 0
		:: else -> n = 2                    /* nothing left to give */
		fi;
		if
		:: n == 2 -> goto restart_out
		:: else -> skip
		fi;
		/* SequenceStore.GiveBack(seg) */
		read(e, r);
		if
		:: (n == 1 && e != t1) || (n == 0 && e != t0) ->
			goto restart_out                /* a segment was taken since */
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
			goto restart_out
		:: !dOn ->                          /* delayed: an error here */
			dOn = true; dRev = r;
			if :: n == 1 -> dEnd = f1 :: else -> dEnd = f0 fi;
			goto restart_out
		:: true -> goto restart_out         /* lost, store unreachable */
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
