"""A2A tasks: the life of one task (the executors' base and the persona executor), what it
reads and makes (images, the spoken answer), where tasks are kept, and push notifications."""
