"""Beyond one machine (D12): reach the other machines of a campaign over SSH.

Each machine's cockpit is the only writer of its own journal. The others pull it,
read-only, into ``.cockpit/peers/<N>/journal.jsonl`` (incrementally, from the last
byte held) and fold it with their own; ``cockpit fleet`` does the same for every
machine, from anywhere, and runs actions as ``cockpit`` commands on the owning
machine. Nothing is ever written on a peer except through its own ``cockpit``.

- ``ssh``     the system OpenSSH client with a control socket: argv, time limits (the
              client's group killed at the limit, the remote command under ``timeout``)
- ``pull``    one pull: a bounded chunk of whole lines (one small round trip when
              nothing changed), lines over the maximum skipped on the peer, the copy
- ``history`` a peer's events in memory, read from its copy within a bound
- ``peers``   the background thread with backoff, what a face shows of each peer, the
              merge of own and peer events
"""
