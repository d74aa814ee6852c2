-- Worker-ID tables of uid-dispenser (MySQL 5.7+ / MariaDB 10.3+, InnoDB).
-- The dispenser runs the statement of its mode at start-up when
-- DISPENSER_CREATE_TABLES=true, with the table names of
-- DISPENSER_WORKER_NODE_TABLE and DISPENSER_WORKER_LEASE_TABLE in place of
-- the quoted default names. Run it by hand when the dispenser's database
-- user may not create tables.

-- Disposable mode: Baidu UidGenerator's table, column for column, so a
-- fleet can share it with running UidGenerator instances. Every start
-- inserts a row; its auto-increment ID is the worker ID, never reused.
-- TYPE: 1 = container, 2 = actual host.
CREATE TABLE IF NOT EXISTS `WORKER_NODE` (
  ID          BIGINT      NOT NULL AUTO_INCREMENT COMMENT 'auto increment id',
  HOST_NAME   VARCHAR(64) NOT NULL COMMENT 'host name',
  PORT        VARCHAR(64) NOT NULL COMMENT 'port',
  TYPE        INT         NOT NULL COMMENT 'node type: ACTUAL or CONTAINER',
  LAUNCH_DATE DATE        NOT NULL COMMENT 'launch date',
  MODIFIED    TIMESTAMP   NOT NULL COMMENT 'modified time',
  CREATED     TIMESTAMP   NOT NULL COMMENT 'created time',
  PRIMARY KEY (ID)
) ENGINE = InnoDB COMMENT = 'DB WorkerID Assigner for UID Generator';

-- Leased mode: one row per worker ID ever leased. A lease is free when
-- LEASE_EXPIRY (UTC, the database server's clock) has passed; RELEASED
-- leases have an expiry in 1970. RESERVED_SECOND is the last unix second
-- the owner may issue IDs for; it only grows, and the next owner starts
-- after it.
CREATE TABLE IF NOT EXISTS `WORKER_LEASE` (
  WORKER_ID       BIGINT      NOT NULL COMMENT 'worker ID',
  OWNER_TOKEN     VARCHAR(64) NOT NULL COMMENT 'random token of the owning claim, empty when released',
  LEASE_EXPIRY    DATETIME(6) NOT NULL COMMENT 'UTC, free after it',
  RESERVED_SECOND BIGINT      NOT NULL COMMENT 'last unix second reserved for IDs',
  HOST_NAME       VARCHAR(64) NOT NULL COMMENT 'host of the current or last owner',
  PORT            VARCHAR(64) NOT NULL COMMENT 'port or start stamp of that owner',
  TYPE            INT         NOT NULL COMMENT '1 = container, 2 = actual host',
  CREATED         DATETIME(6) NOT NULL COMMENT 'UTC, first lease of the worker ID',
  MODIFIED        DATETIME(6) NOT NULL COMMENT 'UTC, last acquire, renewal or release',
  PRIMARY KEY (WORKER_ID)
) ENGINE = InnoDB COMMENT = 'uid-dispenser leased worker IDs';

-- Both modes: the fleet's identity, one row (ID 1) written by the first
-- instance on the store and compared by every later one: the layout (bits
-- and epoch), the worker mode, the subject prefix and the map of regions
-- (REGIONS; a table made before it gets the column from the first
-- instance with DISPENSER_REGIONS, or by hand:
-- ALTER TABLE UID_FLEET ADD COLUMN REGIONS VARCHAR(1024) NOT NULL DEFAULT ''). Instances that
-- differ refuse to start. GENERATION grows when the fleet moves to a new
-- layout (dispenser -new-generation); STARTS_AFTER is the unix second after
-- which that generation's IDs exceed every ID of the one before; below zero
-- (-STARTS_AFTER-1) the record is sealed while dispenser -new-generation
-- revokes the old generation's leases (workerid.Fleet.Sealed).
-- MAX_WORKER_ID (disposable mode): the highest WORKER_NODE ID a start took;
-- an auto-increment that hands out one not above it fell back and is
-- refused (a table made before it gets the column from the first
-- disposable instance, or by hand:
-- ALTER TABLE UID_FLEET ADD COLUMN MAX_WORKER_ID BIGINT NOT NULL DEFAULT 0).
CREATE TABLE IF NOT EXISTS `UID_FLEET` (
  ID             TINYINT      NOT NULL COMMENT 'always 1: one fleet per store',
  GENERATION     INT          NOT NULL COMMENT '1 for the first layout, then one more per change',
  LAYOUT         VARCHAR(64)  NOT NULL COMMENT 'time/worker/sequence bits@RFC 3339 epoch',
  WORKER_MODE    VARCHAR(16)  NOT NULL COMMENT 'leased or disposable',
  SUBJECT_PREFIX VARCHAR(255) NOT NULL COMMENT 'subjects <prefix>.next, .batch, .parse',
  STARTS_AFTER   BIGINT       NOT NULL COMMENT 'unix second; the generation issues IDs only for later ones',
  REGIONS        VARCHAR(1024) NOT NULL DEFAULT '' COMMENT 'map of regions to worker-ID ranges, empty without regions',
  MODIFIED       DATETIME(6)  NOT NULL COMMENT 'UTC, when the generation was recorded',
  MAX_WORKER_ID  BIGINT       NOT NULL DEFAULT 0 COMMENT 'disposable mode: the highest WORKER_NODE ID a start took; a lower or equal one is refused',
  PRIMARY KEY (ID)
) ENGINE = InnoDB COMMENT = 'uid-dispenser fleet identity';

-- Named sequences (DISPENSER_SEQUENCES; the table of
-- DISPENSER_SEQUENCE_TABLE), one row per name, as Meituan Leaf's
-- leaf_alloc: MAX_ID is the end of the last segment handed out. A segment
-- is taken by `UPDATE … SET MAX_ID = MAX_ID + step` and read back in the
-- same transaction; a graceful shutdown lowers MAX_ID back to the unused
-- rest only WHERE MAX_ID is still the end of its own segment. Never lower
-- MAX_ID by hand, nor delete a row in use: numbers below it were handed out.
-- Privileges: SELECT, INSERT, UPDATE on this table.
CREATE TABLE IF NOT EXISTS `UID_SEQUENCE` (
  BIZ_TAG  VARCHAR(64) NOT NULL COMMENT 'sequence name (letters, digits, - and _)',
  MAX_ID   BIGINT      NOT NULL COMMENT 'end (exclusive) of the last segment taken',
  STEP     BIGINT      NOT NULL COMMENT 'size of the last segment taken',
  CREATED  DATETIME(6) NOT NULL COMMENT 'UTC, declaration',
  MODIFIED DATETIME(6) NOT NULL COMMENT 'UTC, last take or give-back',
  PRIMARY KEY (BIZ_TAG)
) ENGINE = InnoDB COMMENT = 'uid-dispenser named sequences';
