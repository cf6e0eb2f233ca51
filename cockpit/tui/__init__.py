"""The Textual face of the cockpit: the only package that imports Textual (or Rich).

``app`` owns the App, its keys and the tick loop; ``panels`` the live widgets;
``dialogs`` the modal screens; ``themes`` finding and loading ``themes/*.tcss``;
``text`` the pure text helpers (bars, sparklines, countdowns) the panels share.
"""
