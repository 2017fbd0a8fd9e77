"""A teacher's class (CONTRACT §14): a different small-number sheet for every student, printable,
with the key (`make`), and the marking of what comes back (`grade`)."""

MAX_STUDENTS = 500   # a school year's classes at once; more is a mistake (a seed typed as N, say)
