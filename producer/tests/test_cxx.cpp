// test_cxx.cpp — the header compiles as C++ and the library links from it.
#include "fzproducer.h"

#include <cstdio>
#include <cstring>
#include <memory>

int main() {
    std::unique_ptr<fzp_producer, void (*)(fzp_producer *)> p(fzp_new(), fzp_close);
    if (!p) return 1;
    if (fzp_set(p.get(), "policy", "never") != FZP_EINVAL || std::strlen(fzp_errmsg(p.get())) == 0) {
        std::fprintf(stderr, "expected FZP_EINVAL with a message\n");
        return 1;
    }
    fzp_result r{};
    static_assert(sizeof(r.key) == 512, "fzp_result layout");
    std::printf("test_cxx: ok (%s)\n", fzp_version());
    return 0;
}
