"""The flight recorder: every tick's telemetry kept on disk for the whole campaign.

This package owns ``.cockpit/recorder.sqlite``: what is kept of each tick's GPU and host
readings, for how long, how it is written, what happens when the file is bad or the
disk full, and the one way to read it back (:class:`RecordingReader`).

Why SQLite, from the standard library (``sqlite3``): in WAL mode a commit is atomic and
survives ``kill -9`` (a killed writer loses only the batch it had not committed yet, and
a reader never sees half of one); it is one file beside the journal, with no server to
run and no dependency to install; and readers open it read-only (``mode=ro``) while the
writer goes on.

What is kept
    per GPU, each second: ``util`` (%), ``mem_used`` (bytes), ``power`` (W), ``temp``
    (°C), ``sm_clock`` and ``mem_clock`` (MHz), ``throttle`` (the reasons' words, raw
    tier only), ``throttled`` (1 when a reason meaning the hardware protects itself —
    thermal, power brake, hw slowdown — holds the clocks down, else 0) and ``pids`` (its
    processes, up to :data:`MAX_PIDS`, raw tier only); the host: ``cpu_percent`` and
    ``mem_used``; each disk: ``free`` (bytes). A reading that is not there (``None``:
    not supported, not read, a lost GPU) is NULL; a value that is not a finite number is
    NULL too, never text.

Two tiers
    *raw*: one row per second (ticks faster than 1 Hz are folded: the first sample of a
    second is kept) for the last :data:`RAW_KEEP_S` (6 h) of sample time; older rows
    are deleted whole minutes at a time, at most :data:`PRUNE_ROWS` rows per table per
    transaction. *minute*: ``n``, ``lo``, ``mean``, ``hi`` of each series for each
    minute of the whole campaign, computed from the raw rows in the transaction that
    follows the minute's close (so a restart in the middle of a minute loses none of
    it). A raw row is deleted only after its minute was aggregated.

Writes
    The tick hands a sample (:meth:`FlightRecorder.record`, its time an argument, so
    time can be simulated): a reference to its frozen readings is kept (a few µs).
    Every :data:`BATCH_S` seconds of sample time (or :data:`MAX_BUFFER` samples) the
    batch goes to a writer thread, which builds the rows and writes them in one
    transaction (``journal_mode=WAL``, ``synchronous=NORMAL``: a commit costs no fsync;
    the WAL is fsynced at its checkpoints, in that thread, never in the tick). Memory
    stays constant: the buffer, at most :data:`QUEUE_BATCHES` batches waiting for the
    writer, SQLite's page cache (2 MiB) and a map of series ids.

When something goes wrong the tick goes on
    A file SQLite cannot read (garbage, a foreign schema, corruption found while
    writing) is moved aside (``recorder.sqlite.unreadable-<UTC stamp>``, the newest
    :data:`KEEP_ASIDE` kept), a warning is shown for :data:`NOTE_S`, and a new
    recording starts. A full disk (or a file that cannot be written) pauses recording
    with a warning while it lasts (samples meanwhile are dropped), tried again every
    :data:`RETRY_S` seconds. A store file that is a symbolic link (or a hard link, or
    not a regular file) is refused, never followed or written through, with a warning
    while it lasts. Another writer holding the file longer than :data:`BUSY_MS` makes a
    batch wait (the buffer stays bounded). Before each batch the writer checks that the
    store's name still names the file it has open: a store deleted under it is
    recreated and the loss said; one replaced (by a link, another file) has its
    history copied aside (``recorder.sqlite.replaced-<UTC stamp>``, SQLite's backup)
    and is never written through. A wall clock that steps forward (sample time ahead
    of the monotonic clock by more than :data:`LEAP_S`) does not empty the raw tier:
    for a window's time after the step, the step is added to the window.

Schema (version :data:`VERSION`)::

    meta(key TEXT PRIMARY KEY, value TEXT)     format, version, aggregated_to (a minute)
    series(id INTEGER PRIMARY KEY, source, key, metric)
        ('gpu', '0', 'util') | ('host', '', 'cpu_percent') | ('disk', '/data', 'free')
    gpu_raw(t, gpu, util, mem_used, power, temp, sm_clock, mem_clock, throttle,
            throttled, pids, PRIMARY KEY (t, gpu)) WITHOUT ROWID
    host_raw(t INTEGER PRIMARY KEY, cpu_percent, mem_used)
    disk_raw(t, disk, free, PRIMARY KEY (t, disk)) WITHOUT ROWID    disk: its series id
    minute(series, m, n, lo, mean, hi, PRIMARY KEY (series, m)) WITHOUT ROWID
        m: minutes since the epoch (the minute [60 m, 60 m + 60) of sample time)

``t`` is whole seconds since the epoch (UTC).
"""

from cockpit.telemetry.flight.reader import RecordingReader
from cockpit.telemetry.flight.store import (
    DISK_METRICS,
    GPU_METRICS,
    HOST_METRICS,
    LEAP_S,
    RAW_KEEP_S,
    Point,
    RecordingUnreadable,
    SeriesKey,
    Totals,
    disk_series,
    gpu_series,
    host_series,
)
from cockpit.telemetry.flight.writer import FlightRecorder

__all__ = ["DISK_METRICS", "GPU_METRICS", "HOST_METRICS", "LEAP_S", "RAW_KEEP_S", "FlightRecorder",
           "Point", "RecordingReader", "RecordingUnreadable", "SeriesKey", "Totals",
           "disk_series", "gpu_series", "host_series"]
