"""``flagos-doctor probe``: who patched each probe of the stack, in what order.

Parent side (never imports torch): :mod:`.runner` starts the child, gathers its records
and builds the JSON document; :mod:`.findings` judges it; :mod:`.formats` renders it.
Child side (standard library until the stack itself imports torch): :mod:`.child` runs the
imports and exercise steps under :mod:`.tracer`.
"""

SCHEMA = "flagos-doctor/probe/1"
