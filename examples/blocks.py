"""Block decomposition: the heat equation on a 2-D (or 3-D) periodic grid of blocks, each
trading its faces with 4 (or 6) neighbours, checked against NumPy.

    shoal run -n 2 examples/blocks.py          # 2-D: a 3 x 2 grid of 16 x 16 blocks
    shoal run -n 2 examples/blocks.py --3d     # 3-D: a 2 x 2 x 2 grid of 8 x 8 x 8 blocks
    shoal run -n 2 --transport inproc examples/blocks.py

Each block keeps one ghost layer around its interior. Every step it sends its first and
last interior layer along each axis to the neighbour on that side and receives the
neighbours' layers into its ghost faces. Faces are views of the block's own array:
along the last axis they are columns such as ``u[1:-1, 0]``, strided in memory, and
channels send and receive them as they are (the send packs a strided view, the receive
unpacks into one). A ``shoal.ReceiveSet`` posts the 2 x D receives of a step and runs
``step`` once all faces have landed.
"""

import numpy as np

import shoal

STEPS, ALPHA = 50, 0.1  # time steps; diffusion number (stable below 1 / (2 D))


def face(u, axis, k):
    """Layer ``k`` of ``u`` along ``axis``, without the ghost cells of the other axes:
    ``face(u, 1, 0)`` of a 2-D block is the column ``u[1:-1, 0]``."""
    return u[tuple(k if d == axis else slice(1, -1) for d in range(u.ndim))]


def initial(shape):
    """The global starting field: a smooth bump plus a product of sines."""
    axes = np.meshgrid(*[np.linspace(0.0, 1.0, n, endpoint=False) for n in shape], indexing="ij")
    return np.prod([np.sin(2 * np.pi * x) for x in axes], axis=0) + np.exp(-sum((x - 0.5) ** 2 for x in axes) * 20)


class Block(shoal.Chare):
    def __init__(self, grid, size):
        me, dims = self.index, len(grid)
        self.u = np.zeros((size + 2,) * dims)  # the interior is u[1:-1, 1:-1(, 1:-1)]
        whole = initial(tuple(g * size for g in grid))
        self.u[(slice(1, -1),) * dims] = whole[tuple(slice(i * size, (i + 1) * size) for i in me)]
        channels, ghosts = [], []
        self.sends = []  # (channel, the interior layer it carries)
        for axis in range(dims):
            for side in (-1, +1):
                peer = list(me)
                peer[axis] = (me[axis] + side) % grid[axis]
                # name each link by its axis and the lower block index along it: with two
                # blocks along an axis, both neighbours are one chare, and ports tell the
                # two links apart (both ends compute the same port)
                low = me[axis] if side > 0 else peer[axis]
                ch = shoal.Channel(self, remote=self.collection[tuple(peer)], port=f"{axis}:{low}")
                channels.append(ch)
                ghosts.append(face(self.u, axis, 0 if side < 0 else size + 1))  # lands here
                self.sends.append((ch, face(self.u, axis, 1 if side < 0 else size)))  # goes there
        self.faces = shoal.ReceiveSet(channels, ghosts, then=self.step)
        self.t, self.done = 0, None

    def start(self, done):
        self.done = done
        self._exchange()

    def _exchange(self):
        for ch, layer in self.sends:
            ch.send(layer)  # a strided view is packed by the send
        self.faces.post()  # step() runs once every face has landed

    def step(self):
        u, inner = self.u, (slice(1, -1),) * self.u.ndim
        lap = -2 * u.ndim * u[inner]
        for axis in range(u.ndim):
            for shift in (0, 2):  # the neighbours below and above along this axis
                lap = lap + u[tuple(slice(shift, shift + u.shape[d] - 2) if d == axis else slice(1, -1)
                                    for d in range(u.ndim))]
        u[inner] += ALPHA * lap
        self.t += 1
        if self.t == STEPS:
            self.contribute((self.index, u[inner].copy()), shoal.reducers.gather, self.done)
        else:
            self._exchange()


def reference(field):
    for _ in range(STEPS):
        lap = sum(np.roll(field, s, axis) for axis in range(field.ndim) for s in (-1, 1)) - 2 * field.ndim * field
        field = field + ALPHA * lap
    return field


def main(args):
    grid, size = ((2, 2, 2), 8) if "--3d" in args else ((3, 2), 16)
    done = shoal.Future()
    shoal.Array(Block, grid, args=(grid, size)).start(done)
    u = np.zeros(tuple(g * size for g in grid))
    for index, part in done.get():
        u[tuple(slice(i * size, (i + 1) * size) for i in index)] = part
    error = float(np.abs(u - reference(initial(u.shape))).max())
    print(f"{len(grid)}-D, {'x'.join(map(str, grid))} blocks of {size}^{len(grid)} cells, {STEPS} steps, "
          f"max difference from NumPy: {error:.1e}")
    if error > 1e-12:
        shoal.exit(1)
    print("blocks: OK")


if __name__ == "__main__":
    shoal.start(main)
