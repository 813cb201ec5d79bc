"""order_tags: the content-tag storage microservice over Redis."""
