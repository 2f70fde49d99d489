/*
 * The sandbox ("pause") process of every pod on the local test cluster (scripts/k8s-up): it holds the pod's
 * namespaces open, reaps the orphans it inherits when it is the pod's init, and exits 0 on SIGINT or SIGTERM.
 * Built static by scripts/k8s-up, since no image registry (and so no registry.k8s.io/pause) is reachable here.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int signal_number) {
    (void)signal_number;
    _exit(0);
}

static void reap(int signal_number) {
    (void)signal_number;
    int saved = errno;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    errno = saved;
}

static int on(int signal_number, void (*handler)(int)) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = handler;
    action.sa_flags = SA_RESTART | (signal_number == SIGCHLD ? SA_NOCLDSTOP : 0);
    sigemptyset(&action.sa_mask);
    return sigaction(signal_number, &action, NULL);
}

int main(void) {
    if (on(SIGINT, stop) != 0 || on(SIGTERM, stop) != 0 || on(SIGCHLD, reap) != 0) {
        static const char message[] = "pause: cannot install its signal handlers\n";
        (void)write(2, message, sizeof message - 1);
        return 1;
    }
    for (;;) {
        pause();
    }
}
