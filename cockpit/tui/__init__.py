"""The Textual face of the cockpit: the only package that imports Textual (or Rich).

``app`` the App: the engine, the tick, themes, keymap and the keys of every screen
(t, ?, q); ``main_screen`` the main screen: the layout, the campaign's keys and when they
apply; ``flows`` those keys' flows (pick → form → confirm → act), one linear ``@work``
method each; ``panels/`` the live widgets, one per module; ``dialogs`` the modal
screens; ``full_screens`` the full screens (chart, log, timeline) and the Snapshot-following
base; ``decision`` what a decision rests on and the bounds on a metric; ``themes``
finding ``themes/*.tcss``; ``text`` pure text helpers; ``untrusted`` literal text and
the last net; ``keymap`` the person's keymap file; ``offers`` what the keys offer now,
picked from the Snapshot (the engine decides; this face only shows and asks).
"""
