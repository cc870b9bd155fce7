"""The cells of tests/runtime/test_local_queue.py's deterministic case, as a module: imported by
its in-process tests and read as the start of its MPI programs."""

import shoal

#: more calls than run_local runs past its starting count in one step (LOCAL_BATCH, 64):
#: the loop stops before the PLAN, which then begins the next step's count with the
#: messages queued behind it
FILL = 200


class Cell(shoal.Chare):
    def __init__(self):
        self.log = []

    def kick(self):
        self.collection.migrate(1, 1)
        self.proxy.later()
        for _ in range(FILL):
            self.proxy.noop()

    def later(self):
        for i in range(3):
            self.collection[1].note(i)

    def noop(self):
        pass

    def note(self, i):
        self.log.append((i, shoal.my_pe()))

    def report(self):
        return shoal.my_pe(), self.log

    def thief(self):
        # an internal inconsistency: something other than the step's loop empties the queue
        from shoal._runtime.context import current

        current().local.clear()


def on_pe_0(i, n):
    return 0
