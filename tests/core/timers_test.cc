// Timers: ManualTimers fire in deadline order on Advance only, with the clock at each deadline;
// AsioTimers fire on the io_context's thread after their delay, and a cancelled or destroyed
// timer never fires.
#include "sluice/timers.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace sluice {
namespace {

using namespace std::chrono_literals;

class ManualTimersTest : public ::testing::Test {
 protected:
  // Starts a timer that records its name and the time it fired at, after the start.
  Timers::Id Record(const std::string& name, Duration after) {
    return timers_.Start(after, [this, name] { fired_.push_back({name, clock_.now() - start_}); });
  }

  struct Fired {
    std::string name;
    Duration at;
    bool operator==(const Fired&) const = default;
  };

  ManualClock clock_;
  const Time start_ = clock_.now();
  ManualTimers timers_{clock_};
  std::vector<Fired> fired_;
};

TEST_F(ManualTimersTest, FireOnlyOnAdvanceInDeadlineOrderThenStartOrder) {
  Record("late", 30ms);
  Record("first", 10ms);
  Record("tie-a", 20ms);
  Record("tie-b", 20ms);
  Record("negative", -5ms);     // as if 0
  EXPECT_TRUE(fired_.empty());  // never inline
  EXPECT_EQ(timers_.pending(), 5u);

  timers_.Advance(25ms);
  EXPECT_EQ(fired_, (std::vector<Fired>{
                        {"negative", 0ms}, {"first", 10ms}, {"tie-a", 20ms}, {"tie-b", 20ms}}));
  EXPECT_EQ(clock_.now() - start_, 25ms);
  EXPECT_EQ(timers_.pending(), 1u);

  timers_.Advance(5ms);
  EXPECT_EQ(fired_.back(), (Fired{"late", 30ms}));
  EXPECT_EQ(timers_.pending(), 0u);
}

TEST_F(ManualTimersTest, CancelledTimersNeverFire) {
  const Timers::Id kept = Record("kept", 10ms);
  const Timers::Id cancelled = Record("cancelled", 10ms);
  timers_.Cancel(cancelled);
  timers_.Cancel(cancelled);  // twice: nothing more
  timers_.Advance(1s);
  EXPECT_EQ(fired_, (std::vector<Fired>{{"kept", 10ms}}));
  timers_.Cancel(kept);  // already fired: nothing
  EXPECT_EQ(timers_.pending(), 0u);
}

TEST_F(ManualTimersTest, TimersStartedByACallbackFireInTheSameAdvanceWhenDue) {
  timers_.Start(10ms, [this] {
    Record("now", 0ms);
    Record("within", 5ms);
    Record("beyond", 50ms);
  });
  timers_.Advance(20ms);
  EXPECT_EQ(fired_, (std::vector<Fired>{{"now", 10ms}, {"within", 15ms}}));
  EXPECT_EQ(timers_.pending(), 1u);

  Record("zero", 0ms);
  timers_.Advance(0ms);  // fires what is due now, no more
  EXPECT_EQ(fired_.back(), (Fired{"zero", 20ms}));
  EXPECT_EQ(timers_.pending(), 1u);
}

class AsioTimersTest : public ::testing::Test {
 protected:
  ~AsioTimersTest() override {
    work_.reset();
    runner_.join();
  }

  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_ =
      boost::asio::make_work_guard(io_);
  std::thread runner_{[this] { io_.run(); }};
};

TEST_F(AsioTimersTest, FiresOnTheContextsThreadAfterItsDelay) {
  AsioTimers timers(io_);
  std::promise<std::thread::id> fired_on;
  const auto before = std::chrono::steady_clock::now();
  timers.Start(20ms, [&] { fired_on.set_value(std::this_thread::get_id()); });
  auto fired = fired_on.get_future();
  ASSERT_EQ(fired.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(fired.get(), runner_.get_id());
  EXPECT_GE(std::chrono::steady_clock::now() - before, 20ms);
}

TEST_F(AsioTimersTest, CancelledAndDestroyedTimersNeverFire) {
  std::atomic<int> fired{0};
  std::promise<void> last;
  {
    AsioTimers timers(io_);
    const Timers::Id cancelled = timers.Start(10ms, [&] { ++fired; });
    timers.Cancel(cancelled);
    timers.Start(1h, [&] { ++fired; });  // destroyed with `timers`
  }
  AsioTimers timers(io_);
  timers.Start(30ms, [&] { last.set_value(); });  // after the cancelled one would have fired
  ASSERT_EQ(last.get_future().wait_for(5s), std::future_status::ready);
  EXPECT_EQ(fired.load(), 0);
}

}  // namespace
}  // namespace sluice
