"""End to end: the real `cockpit` command, real files, processes, sshd and exports."""
