"""Beyond one machine (D12): reach the other machines of a campaign over SSH.

Each machine's cockpit is the only writer of its own journal. The others pull it,
read-only, into ``.cockpit/peers/<N>/journal.jsonl`` (incrementally, from the last
byte held) and fold it with their own; ``cockpit fleet`` does the same for every
machine, from anywhere, and runs actions as ``cockpit`` commands on the owning
machine. Nothing is ever written on a peer except through its own ``cockpit``.

- ``ssh``    the system OpenSSH client with a control socket: argv, time limits
- ``peers``  the pull (one small round trip when nothing changed), its cache, the
             background thread with backoff, the merge of own and peer events
"""
