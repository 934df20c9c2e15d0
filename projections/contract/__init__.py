"""Tables as a contract: the projection columns integrators may query, as versioned views.

``surface`` declares what each version offers (types come from projections/tables.py), ``frozen``
keeps the record of each published version's shape and the rule that it only grows, ``views``
creates the views over the live tables, and ``docs`` writes docs/tables.md from the declaration.
"""
