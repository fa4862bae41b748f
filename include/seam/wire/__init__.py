"""Wire: what travels through Kafka, and how.

- ``records``: the record shape (one JSON value per row change, Debezium-like) and its positions.
- ``codecs``: one codec per MySQL type family, shared by the record, the target's types and validation.
- ``boundary``: BEGIN and END of a batch (with the tallies that prove it whole) and the stream's controls.
- ``topics``: topic names, the producer that fails loudly on an undelivered message, and the consumer.
- ``kafka_source``: the topics as a PySpark data source, for the sink run by Spark.

Delivery guarantee: none of its own; Kafka is a buffer. What makes delivery exact is carried in the
messages (batch ids, parts, tallies, positions, each change's ``prev``) and checked by the sink.
"""
