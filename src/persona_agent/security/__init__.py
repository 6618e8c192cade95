"""Protection: who may do what (authorization); more of the hub's guards move here."""
