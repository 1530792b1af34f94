/* A pod sandbox "pause" process for the pullcheck test cluster (scripts/cluster.sh):
 * sleeps until SIGINT/SIGTERM, then exits 0; reaps zombies when it is PID 1 of a
 * shared PID namespace. Built with `musl-gcc -static -Os`. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) { (void)sig; _exit(0); }

static void on_child(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    puts("pause (pullcheck test cluster)");
    return 0;
  }
  if (getpid() != 1) fputs("pause: warning: not PID 1\n", stderr);
  struct sigaction stop = {.sa_handler = on_stop};
  struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP};
  if (sigaction(SIGINT, &stop, NULL) < 0 || sigaction(SIGTERM, &stop, NULL) < 0 ||
      sigaction(SIGCHLD, &child, NULL) < 0) {
    perror("pause: sigaction");
    return 1;
  }
  for (;;) pause();
}
