"""Protection: who calls (principals, API keys, OIDC), who may do what (authorization),
limits, quotas, audit and signatures; the guards on requests coming in (:mod:`.ingress`) and
on the calls the hub makes (:mod:`.egress`)."""
