"""``shoal bench stall``: does a large send stall its PE while the receiver is busy?"""
