"""Images a user sends: read and made small (:mod:`.images`), fetched by URL under the push
URL guard's rules (:mod:`.fetch`), stored once a conversation (:mod:`.media_store`), shown to the
models that see (:mod:`.vision`, :mod:`.expand`)."""
