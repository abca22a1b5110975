"""``/ui``, the status page: its routes (``page``), its sign-in session (``session``) and its
short cache of a tenant's counts (``cache``); templates and stylesheet in ``templates/``."""
