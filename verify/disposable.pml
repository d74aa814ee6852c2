/*
 * Disposable worker IDs: workerid/mysqlstore's disposable assigner (Baidu
 * UidGenerator's WORKER_NODE table: every start INSERTs a row and takes
 * its AUTO_INCREMENT ID as its worker ID, for the life of the process; a
 * worker ID is never reused). docs/verification.md maps every step to the
 * Go it models.
 *
 * Property: no worker ID is ever used by two starts (assertion when a
 * start begins issuing; a worker ID used by a start that has died since
 * counts too: its IDs of past seconds are out, and a clock that steps
 * back would repeat them).
 *
 * Environment, at every step: an instance starts (up to MAXSTARTS starts),
 * crashes, pauses for any length; the store forgets its last k <= K
 * acknowledged writes (a failover to a replica that lacks them, a power
 * loss with a lazy flush), once: the counter, the rows and the fleet
 * record come back as they were; and, once, the AUTO_INCREMENT counter
 * alone falls back to the highest row's ID + 1 after the newest rows were
 * deleted (an operator's clean-up, then MySQL before 8.0 restarting, or a
 * table rebuilt). K stands for W (DISPENSER_STORE_LOSS_WINDOW).
 *
 * D5, two parts (DURABILITY-DESIGN.md, MODELS-FINDINGS.md):
 *   fleet max   a start refuses a worker ID not above the fleet's highest
 *               recorded one (a record other than the counter), and
 *               records its own: this stops the counter falling back;
 *   durable row a start issues nothing until its row is durable: it waits
 *               W after its INSERT (the store has synced since) and reads
 *               its row back at the primary: its own token (host, port,
 *               launch time) in the row of its worker ID, else the worker
 *               ID is refused. This stops a loss that forgets the INSERT
 *               and the fleet record together.
 *
 * Mutations (spin -DMUTANT_...): each must produce a violation.
 *   ACCEPT_REUSED   the fleet-max check removed
 *   NO_DURABLE_ROW  the read-back after W removed: D5 as first designed,
 *                   the fleet max alone. The loss forgets the INSERT and
 *                   the record together (both within W), and the next
 *                   start gets the same worker ID, above the record as it
 *                   came back.
 */

#define NI 2            /* instances */
#ifndef MAXSTARTS
#define MAXSTARTS 3     /* starts in the whole run (fresh tokens) */
#endif
#define MAXID 4         /* worker IDs 1..MAXID-1 */
#ifndef K
#define K 2             /* the store forgets at most its last K writes */
#endif
#ifndef LOSSES
#define LOSSES 1        /* losses of the last K writes */
#endif
#ifndef COUNTER_LOSSES
#define COUNTER_LOSSES 1 /* the counter alone falling back */
#endif

/* The store: the AUTO_INCREMENT counter (the next ID), each row's owner
 * (the start's token, 0: none), the fleet record (DESIGN_FLEET_MAX). */
byte ai = 1;
byte row[MAXID];
byte fleetMax = 0;
/* What a loss comes back to. */
byte sAi = 1;
byte sRow[MAXID];
byte sFleetMax = 0;
byte unsynced = 0;
byte losses = 0;
byte counterLosses = 0;
bool rowDirty[MAXID];   /* a row written since the last sync */
byte si;

byte starts = 0;
/* Ghost: how many starts used each worker ID, ever. */
byte usedBy[MAXID];

inline sync() {
	sAi = ai; sFleetMax = fleetMax;
	for (si : 0 .. MAXID - 1) { sRow[si] = row[si]; rowDirty[si] = false }
	si = 0; unsynced = 0
}
inline written() {
	if :: unsynced == K -> sync() :: else -> skip fi;
	unsynced++
}

active proctype Store() {
	do
	:: atomic { unsynced > 0 -> sync() }
	:: atomic { unsynced > 0 && losses < LOSSES ->
		losses++;
		ai = sAi; fleetMax = sFleetMax;
		for (si : 0 .. MAXID - 1) { row[si] = sRow[si]; rowDirty[si] = false }
		si = 0; unsynced = 0
	   }
	/* an operator deletes the newest row; a restart of MySQL < 8.0 sets
	 * the counter to MAX(ID) + 1 */
	:: atomic { counterLosses < COUNTER_LOSSES && ai > 1 && row[ai - 1] != 0 ->
		counterLosses++;
		row[ai - 1] = 0; ai--; sync()
	   }
	od
}

proctype Instance(byte me) {
	byte tok, id;
	byte st;                /* 0: not started, 1: inserted, 2: issuing */

restart:
	tok = 0; id = 0; st = 0;
	do
	:: st != 0 -> goto restart          /* crash */

	/* start: INSERT INTO WORKER_NODE ...; LAST_INSERT_ID() */
	:: atomic { st == 0 && starts < MAXSTARTS && ai < MAXID ->
		starts++; tok = starts;
		if
		:: true ->
			written();
			id = ai; ai++; row[id] = tok; rowDirty[id] = true;
#ifndef MUTANT_ACCEPT_REUSED
			/* fleet max: refused when not above the fleet's highest
			 * recorded worker ID; else recorded */
			if
			:: id <= fleetMax -> goto restart
			:: else -> written(); fleetMax = id
			fi;
#endif
			st = 1
		:: true -> skip             /* the store unreachable: no start */
		fi
	   }

	/* D5: W after the INSERT (the store synced since), the row read back */
	:: atomic { st == 1 &&
#ifdef MUTANT_NO_DURABLE_ROW
		true ->
#else
		!rowDirty[id] ->
		if
		:: row[id] != tok -> goto restart   /* refused: not its row */
		:: else -> skip
		fi;
#endif
		usedBy[id]++;
		assert(usedBy[id] <= 1);
		st = 2
	   }
	od
}

init {
	atomic { run Instance(0); run Instance(1) }
}
