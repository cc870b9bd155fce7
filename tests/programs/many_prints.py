"""Every PE prints many lines, each in several pieces (print with several arguments)."""
import shoal


class Talker(shoal.Chare):
    def talk(self, n):
        for i in range(n):
            print("line", i, "from", "PE", shoal.my_pe(), "a", "b", "c", "d", "e", "end")


def main(args):
    shoal.Group(Talker).talk(3000, ret=True).get()


shoal.start(main)
