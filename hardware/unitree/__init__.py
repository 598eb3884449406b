"""Unitree robots on the wire: DDS message types (unitree_hg family), their packed C layout and CRC."""
