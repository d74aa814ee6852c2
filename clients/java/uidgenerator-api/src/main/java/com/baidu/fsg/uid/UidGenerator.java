package com.baidu.fsg.uid;

import com.baidu.fsg.uid.exception.UidGenerateException;

/**
 * Baidu UidGenerator's interface, with the same name and methods, so that
 * code written against it (and beans typed by it) work unchanged with
 * uid-dispenser's {@code DispenserUidGenerator}. Baidu never published its
 * jar: a service that builds it itself keeps its own and excludes this
 * artifact; the two are interchangeable.
 */
public interface UidGenerator {
    /**
     * A unique ID.
     *
     * @throws UidGenerateException when none can be had
     */
    long getUID() throws UidGenerateException;

    /**
     * The ID's fields as UidGenerator's JSON:
     * {@code {"UID":"…","timestamp":"yyyy-MM-dd HH:mm:ss","workerId":"…","sequence":"…"}}.
     */
    String parseUID(long uid);
}
