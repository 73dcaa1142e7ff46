"""What every floor shares, standard library only: the errors a user can act on, atomic
file writes, progress on a terminal, readable numbers and names, memory given back to the
system. Imports nothing else of nsyswrap."""
